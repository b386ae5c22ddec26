#include "runtime/context.h"

#include "runtime/error.h"

namespace blockscope {

#ifdef BLOCKSCOPE_WITH_CUDA
std::shared_ptr<Backend> make_cuda_backend(int index);  // runtime/cuda/cuda_backend.cpp
#endif

bool parse_device(const std::string& text, Device* out) {
  if (text == "cpu") { *out = Device::cpu(); return true; }
  if (text == "cuda") { *out = Device::cuda(0); return true; }
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    int index = 0;
    for (size_t i = 5; i < text.size(); ++i) {
      if (text[i] < '0' || text[i] > '9' || index > 1000) return false;
      index = index * 10 + (text[i] - '0');
    }
    *out = Device::cuda(index);
    return true;
  }
  return false;
}

Context::Context(Device device) : device_(device) {
  if (device.is_cpu()) {
    backend_ = make_cpu_backend();
    return;
  }
#ifdef BLOCKSCOPE_WITH_CUDA
  const int count = cuda_device_count();
  BS_CHECK_INPUT(count > 0, "device ", device.str(), " requested, but no CUDA GPU is present");
  BS_CHECK_INPUT(device.index < count, "device ", device.str(), " requested, but only ", count, " CUDA GPU(s) are present");
  backend_ = make_cuda_backend(device.index);
#else
  throw InputError("device " + device.str() + " requested, but this blockscope was built without CUDA");
#endif
}

Context::~Context() = default;

Tensor Context::empty(const Shape& shape, DType dtype) {
  for (int64_t s : shape) BS_CHECK(s >= 0, "negative dimension in ", shape_str(shape));
  auto storage = std::make_shared<Storage>(backend_, static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype));
  return Tensor(std::move(storage), shape, dtype);
}

Tensor Context::copy_from(const Tensor& src) {
  Tensor out = empty(src.shape(), src.dtype());
  if (out.numel() == 0) return out;
  if (src.is_contiguous() && src.device() == device_) {
    // From another context on this GPU: its stream may still be writing src (no ordering
    // between two contexts' streams, see check_same_context).
    if (device_.is_cuda() && &src.backend() != backend_.get()) src.backend().synchronize();
    backend_->copy_within(out.data(), src.data(), out.nbytes());
  } else if (src.is_contiguous() && src.device().is_cpu()) {
    backend_->copy_to_device(out.data(), src.data(), out.nbytes());
  } else if (src.is_contiguous() && device_.is_cpu()) {
    src.backend().copy_to_host(out.data(), src.data(), out.nbytes());
  } else {
    from_floats(out, to_floats(src));  // strided or cross-device: through the host (exact: same dtype)
  }
  return out;
}

void check_same_context(Context& ctx, const char* op, const Tensor& t) {
  if (!t.defined() || !t.device().is_cuda() || t.device() != ctx.device()) return;
  BS_CHECK_INPUT(&t.backend() == &ctx.backend(), op, ": tensor ", t.str(), " belongs to another context on ",
                 t.device().str(), " (its own stream): nothing orders that stream's writes before this op; copy it "
                 "into this context first (ctx.copy_from(t) synchronises the other stream)");
}

std::string Context::scope_path() const {
  std::string path;
  for (const auto& part : scope_) {
    if (!path.empty()) path += '/';
    path += part;
  }
  return path;
}

}  // namespace blockscope
