#include "ops/common/paths.h"

namespace blockscope::ops {

const char* path_name(LinearPath path) {
  switch (path) {
    case LinearPath::naive: return "naive";
    case LinearPath::epilogue: return "epilogue";
    case LinearPath::addmm: return "addmm";
  }
  return "?";
}

const char* path_name(AttentionPath path) {
  switch (path) {
    case AttentionPath::naive: return "naive";
    case AttentionPath::inplace: return "inplace";
    case AttentionPath::fused_softmax: return "fused_softmax";
    case AttentionPath::flash: return "flash";
  }
  return "?";
}

const char* path_name(MlpPath path) {
  switch (path) {
    case MlpPath::naive: return "naive";
    case MlpPath::epilogue: return "epilogue";
    case MlpPath::fused: return "fused";
  }
  return "?";
}

const char* activation_name(Activation act) {
  switch (act) {
    case Activation::gelu_erf: return "gelu";
    case Activation::gelu_tanh: return "gelu_tanh";
    case Activation::silu: return "silu";
    case Activation::relu: return "relu";
  }
  return "?";
}

bool parse_path(const std::string& text, LinearPath* out) {
  for (LinearPath p : {LinearPath::naive, LinearPath::epilogue, LinearPath::addmm})
    if (text == path_name(p)) { *out = p; return true; }
  return false;
}

bool parse_path(const std::string& text, AttentionPath* out) {
  for (AttentionPath p : {AttentionPath::naive, AttentionPath::inplace, AttentionPath::fused_softmax, AttentionPath::flash})
    if (text == path_name(p)) { *out = p; return true; }
  return false;
}

bool parse_path(const std::string& text, MlpPath* out) {
  for (MlpPath p : {MlpPath::naive, MlpPath::epilogue, MlpPath::fused})
    if (text == path_name(p)) { *out = p; return true; }
  return false;
}

bool parse_activation(const std::string& text, Activation* out) {
  for (Activation a : {Activation::gelu_erf, Activation::gelu_tanh, Activation::silu, Activation::relu})
    if (text == activation_name(a)) { *out = a; return true; }
  if (text == "gelu_erf") { *out = Activation::gelu_erf; return true; }
  if (text == "gelu_new" || text == "gelu_pytorch_tanh") { *out = Activation::gelu_tanh; return true; }  // HF names
  if (text == "swish") { *out = Activation::silu; return true; }
  return false;
}

}  // namespace blockscope::ops
