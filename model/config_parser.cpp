// Reading a workload config: the document (one YAML document, no NUL byte), --set overrides
// applied first (model/config_overrides.cpp), a Hugging Face config.json imported on request
// (model/config_hf.cpp), then the schema section by section (model/config_sections.cpp,
// model/config_model.cpp), all through the YAML reader of model/config_reader.h.
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include "model/config.h"
#include "model/config_reader.h"
#include "runtime/error.h"

namespace blockscope {

using namespace config_reader;

namespace {

const std::vector<std::string> kTopKeys = {"name",    "workload", "device", "dtype", "seed", "model",  "input",
                                           "shape",   "decode",   "weights", "paths", "run",   "cpu",     "profile",
                                           "compare", "parallel", "precision"};
const std::vector<std::string> kModelKeys = {"family",   "d_model",    "n_heads", "n_kv_heads", "head_dim",
                                             "d_ff",     "n_layers",   "norm_eps", "rope_theta", "norm",
                                             "activation", "gated",    "bias",    "rope",       "causal"};

// The whole config, section by section, in the order their rules depend on each other.
WorkloadConfig parse_config(Reader& reader, YAML::Node& root, const std::string& source) {
  WorkloadConfig config;
  config.source = source;
  if (!root.IsDefined() || root.IsNull()) reader.fail(root, "", "the config is empty (expected a map with at least 'workload')");
  Section top(reader, root, "", kTopKeys);

  config.name = top.get_string("name", "");
  top.require("workload", "one of " + join_list(workload_names()));
  parse_workload_kind(top.get_choice("workload", "", workload_names(), "workload"), &config.kind);
  config.device = read_device(top);
  std::vector<std::string> dtypes;
  for (DType d : kComputeDTypes) dtypes.push_back(dtype_name(d));
  DType storage_only;
  if (top.has("dtype") && parse_dtype(top.get_string("dtype", ""), &storage_only) && is_fp8(storage_only)) {
    top.fail("dtype", std::string(dtype_name(storage_only)) + " is a storage type: a workload computes in " +
                          join_list(dtypes) + " (docs/FP8.md)");
  }
  const std::string dtype = top.get_choice("dtype", "f32", dtypes, "dtype");
  parse_dtype(dtype, &config.dtype);
  config.seed = static_cast<uint64_t>(top.get_int("seed", 0, 0, std::numeric_limits<int64_t>::max()));

  config.weights = read_weights(reader, top, config.kind);
  if (!config.weights.config.empty()) import_hf_config(reader, root, config.weights.config, top.node_for("weights"));
  // Re-read the model section: the HF import may have created or extended it.
  Section model(reader, root["model"], "model", kModelKeys);
  config.model = read_model(reader, model, config.kind);
  read_input(reader, top, config);
  read_shape(reader, top, config);
  read_decode(reader, top, config);
  read_parallel(reader, top, config);
  check_sizes(reader, root, config);

  // Paths: defaults per workload, then the file's.
  PathConfig defaults;
  defaults.mlp = config.model.gated ? ops::MlpPath::fused : ops::MlpPath::epilogue;
  Section paths(reader, root["paths"], "paths", path_keys());
  config.paths = read_paths(paths, config.kind, defaults, nullptr);
  if (is_block_workload(config.kind) || config.kind == WorkloadKind::mlp) check_mlp_path(paths, config.model, config.paths);
  check_decode_path(paths, config.kind, config.paths);

  read_precision(reader, top, config);
  read_run(reader, top, config);
  read_cpu(reader, top, config);
  read_profile(reader, top, config);
  read_compare(reader, top, config);
  return config;
}

// The 1-based number of the first line of `text` (without its newline) for which
// `visit(row)` is true, 0 when there is none.
template <typename Visit>
int first_line_where(const std::string& text, Visit visit) {
  int line = 1;
  for (size_t start = 0; start < text.size(); ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (visit(text.substr(start, end - start))) return line;
    start = end + 1;
  }
  return 0;
}

// Whether `row` begins with the 3-character document marker `marker` ("---", "...") standing
// alone or followed by whitespace, or, when `comment_may_follow`, directly by a '#'.
bool is_document_marker(const std::string& row, const char* marker, bool comment_may_follow = false) {
  if (row.rfind(marker, 0) != 0) return false;
  return row.size() == 3 || row[3] == ' ' || row[3] == '\t' || row[3] == '\r' || (comment_may_follow && row[3] == '#');
}

// Whether `row` is blank or only a comment.
bool blank_or_comment(const std::string& row) {
  const size_t first = row.find_first_not_of(" \t\r");
  return first == std::string::npos || row[first] == '#';
}

// The 1-based line of a document start marker ("---" at the start of a line, alone or followed
// by a space) that begins a second document, 0 when there is none. A marker before any content
// only opens the first document.
int second_document_start(const std::string& text) {
  bool content = false;
  return first_line_where(text, [&](const std::string& row) {
    const bool marker = is_document_marker(row, "---");
    if (marker && content) return true;
    if (!marker && !blank_or_comment(row) && row.rfind("%", 0) != 0) content = true;
    return false;
  });
}

// The 1-based line of the first content after a document end marker ("..." alone on a line):
// YAML ends the document there and yaml-cpp drops what follows without a word. 0 when none.
int content_after_document_end(const std::string& text) {
  bool ended = false;
  return first_line_where(text, [&](const std::string& row) {
    if (ended && !blank_or_comment(row)) return true;
    if (is_document_marker(row, "...", /*comment_may_follow=*/true)) ended = true;
    return false;
  });
}

// The byte offset of the first byte that is not part of a well-formed UTF-8 sequence (overlong
// forms, surrogates and code points above U+10FFFF included), or npos. YAML is Unicode text;
// a name that is not would fail later, when a JSON output is written.
size_t first_invalid_utf8(const std::string& text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char lead = bytes[i];
    size_t length = 0;
    uint32_t code = 0, min = 0;
    if (lead < 0x80) { i += 1; continue; }
    if ((lead & 0xE0) == 0xC0) length = 2, code = lead & 0x1F, min = 0x80;
    else if ((lead & 0xF0) == 0xE0) length = 3, code = lead & 0x0F, min = 0x800;
    else if ((lead & 0xF8) == 0xF0) length = 4, code = lead & 0x07, min = 0x10000;
    else return i;
    if (i + length > n) return i;
    for (size_t k = 1; k < length; ++k) {
      if ((bytes[i + k] & 0xC0) != 0x80) return i;
      code = (code << 6) | (bytes[i + k] & 0x3F);
    }
    if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return i;
    i += length;
  }
  return std::string::npos;
}

// Flow collections ([...], {...}) nested deeper than this are refused: a config is a few levels
// deep, and yaml-cpp meets ~500 with nothing better than "bad file".
constexpr int kMaxFlowNesting = 64;

// The byte offset where flow collections first nest deeper than kMaxFlowNesting, or npos.
// Brackets inside quotes and comments do not count.
size_t too_deep_flow_nesting(const std::string& text) {
  int depth = 0;
  char quote = 0;
  bool comment = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (comment) {
      comment = ch != '\n';
    } else if (quote != 0) {
      if (ch == quote) quote = 0;
    } else if (ch == '"' || ch == '\'') {
      quote = ch;
    } else if (ch == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\n')) {
      comment = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > kMaxFlowNesting) return i;
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string::npos;
}

// "source:line:column" of a byte offset.
std::string position_of(const std::string& text, size_t offset, const std::string& source) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') ++line, column = 1;
    else ++column;
  }
  return source + ":" + std::to_string(line) + ":" + std::to_string(column);
}

// "a.b" -> scalar text for every leaf of `node` (sequences as a[0], a[1]; an empty map or
// sequence as {} / []), in the order the YAML gives them.
void flatten_keys(const YAML::Node& node, const std::string& prefix, std::vector<std::pair<std::string, std::string>>* out) {
  if (node.IsMap()) {
    if (node.size() == 0) out->emplace_back(prefix, "{}");
    for (const auto& entry : node) {
      const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "?";
      flatten_keys(entry.second, prefix.empty() ? key : prefix + "." + key, out);
    }
  } else if (node.IsSequence()) {
    if (node.size() == 0) out->emplace_back(prefix, "[]");
    for (size_t i = 0; i < node.size(); ++i) flatten_keys(node[i], prefix + "[" + std::to_string(i) + "]", out);
  } else if (node.IsScalar()) {
    out->emplace_back(prefix, node.Scalar());
  } else {
    out->emplace_back(prefix, "null");
  }
}

WorkloadConfig parse_text(const std::string& text, const std::string& source, const std::vector<std::string>& sets) {
  if (const size_t bad = first_invalid_utf8(text); bad != std::string::npos) {
    throw InputError(position_of(text, bad, source) + ": not valid UTF-8 text (byte " + std::to_string(bad) +
                     "): a config is YAML, which is Unicode");
  }
  // YAML allows no NUL byte (and yaml-cpp's document loop can spin forever on one).
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) {
    throw InputError(source + ": byte " + std::to_string(nul) + " is a NUL byte: a config is YAML text");
  }
  // One document: a second one would otherwise be dropped without a word.
  const int second_document_line = second_document_start(text);
  if (second_document_line > 0) {
    throw InputError(source + ":" + std::to_string(second_document_line) +
                     ": a second YAML document starts here; a config is one document (remove the '---' and what "
                     "follows, or split the file)");
  }
  if (const size_t deep = too_deep_flow_nesting(text); deep != std::string::npos) {
    throw InputError(position_of(text, deep, source) + ": [ ] and { } nest more than " + std::to_string(kMaxFlowNesting) +
                     " deep here; a config is a few levels deep");
  }
  const int after_end = content_after_document_end(text);
  if (after_end > 0) {
    throw InputError(source + ":" + std::to_string(after_end) +
                     ": content after the document end marker '...' would be ignored; remove the '...' or what follows");
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(source + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                     ": YAML syntax error: " + e.msg);
  } catch (const YAML::Exception& e) {
    throw InputError(source + ": YAML error: " + e.msg);
  }
  Reader reader(source);
  if (!sets.empty() && (!root.IsDefined() || root.IsNull())) root = YAML::Node(YAML::NodeType::Map);
  for (const std::string& set : sets) {
    if (first_invalid_utf8(set) != std::string::npos) throw InputError("--set '" + set + "': not valid UTF-8 text");
    apply_set(root, set, reader);
  }
  try {
    WorkloadConfig config = parse_config(reader, root, source);
    flatten_keys(root, "", &config.keys);
    return config;
  } catch (const YAML::Exception& e) {
    // yaml-cpp should not throw past our checks; if it does, keep the exit code an input error.
    throw InputError(source + ": YAML error: " + e.msg);
  }
}

}  // namespace

WorkloadConfig load_config_text(const std::string& text, const std::string& source, const std::vector<std::string>& sets) {
  return parse_text(text, source, sets);
}

WorkloadConfig load_config_file(const std::string& path, const std::vector<std::string>& sets) {
  std::error_code error;
  if (path != "-" && std::filesystem::is_directory(path, error)) {
    throw InputError("config '" + path + "' is a directory (give a .yaml file, e.g. " + path + "/default.yaml)");
  }
  // A regular file (or standard input) of at most config_reader::kMaxConfigBytes: /dev/zero is refused, not
  // read until memory runs out.
  const std::string text = read_input_file(path, "config", config_reader::kMaxConfigBytes);
  return parse_text(text, path == "-" ? "<stdin>" : path, sets);
}

WorkloadConfig load_default_config(const std::vector<std::string>& sets) {
  return parse_text(default_config_yaml(), "<default config>", sets);
}

}  // namespace blockscope
