#include "python/arrays.h"

#include <memory>

namespace blockscope::python {

namespace {

// "float64", "int32", "bfloat16": the element type as NumPy and torch users name it.
std::string dlpack_type_name(const nb::dlpack::dtype& type) {
  using Code = nb::dlpack::dtype_code;
  std::string kind;
  switch (static_cast<Code>(type.code)) {
    case Code::Int: kind = "int"; break;
    case Code::UInt: kind = "uint"; break;
    case Code::Float: kind = "float"; break;
    case Code::Bfloat: kind = "bfloat"; break;
    case Code::Complex: kind = "complex"; break;
    case Code::Bool: return "bool";
    default: kind = "type code " + std::to_string(type.code) + " of "; break;
  }
  return kind + std::to_string(type.bits) + (type.lanes != 1 ? " x" + std::to_string(type.lanes) : "");
}

template <typename Array>
Tensor borrow_array(const Array& array, const char* argument) {
  if (array.device_type() != nb::device::cpu::value) {
    throw InputError(std::string(argument) + ": an array on a device (DLPack device type " +
                     std::to_string(array.device_type()) +
                     "); blockscope's Python ops take CPU arrays in this build (docs/PYTHON.md)");
  }
  const nb::dlpack::dtype type = array.dtype();
  DType dtype;
  if (type == nb::dtype<float>()) {
    dtype = DType::f32;
  } else if (type.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Float) && type.bits == 16 && type.lanes == 1) {
    dtype = DType::f16;
  } else if (type.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat) && type.bits == 16 && type.lanes == 1) {
    dtype = DType::bf16;
  } else {
    throw InputError(std::string(argument) + ": elements of type " + dlpack_type_name(type) +
                     "; blockscope's ops take float32, float16 or bfloat16 (convert with .astype or .to)");
  }
  Shape shape, strides;
  int64_t span = 1;  // elements from the first to one past the last
  for (size_t d = 0; d < array.ndim(); ++d) {
    shape.push_back(static_cast<int64_t>(array.shape(d)));
    strides.push_back(array.stride(d));
  }
  const int64_t numel = shape_numel(shape);
  if (numel > 0 && array.data() == nullptr) {  // a torch tensor whose storage was resized to nothing
    throw InputError(std::string(argument) + ": an array of " + shape_str(shape) +
                     " elements with no memory behind it (its storage was released or resized to nothing)");
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 1) continue;  // the stride of a dimension of one element is never followed
    if (strides[d] < 0) {
      throw InputError(std::string(argument) + ": a negative stride in dimension " + std::to_string(d) +
                       " (a reversed view); pass a copy (numpy.ascontiguousarray, tensor.contiguous())");
    }
    if (strides[d] == 0) {
      throw InputError(std::string(argument) + ": stride 0 in dimension " + std::to_string(d) +
                       " (a broadcast view); pass a copy (numpy.ascontiguousarray, tensor.contiguous())");
    }
    span += (shape[d] - 1) * strides[d];
  }
  if (numel == 0) span = 0;
  // Held as long as the storage lives; let go with the GIL held, whichever thread drops it last.
  auto keep = std::shared_ptr<void>(new Array(array), [](void* held) {
    nb::gil_scoped_acquire gil;
    delete static_cast<Array*>(held);
  });
  auto storage = std::make_shared<Storage>(cpu_context().backend_ptr(), const_cast<void*>(static_cast<const void*>(array.data())),
                                           static_cast<size_t>(span) * dtype_size(dtype), std::move(keep));
  return Tensor(std::move(storage), std::move(shape), std::move(strides), 0, dtype);
}

}  // namespace

Tensor borrow(const InputArray& array, const char* argument) { return borrow_array(array, argument); }
Tensor borrow_output(const OutputArray& array, const char* argument) { return borrow_array(array, argument); }

nb::object to_array(const Tensor& tensor, bool as_torch) {
  nb::dlpack::dtype type;
  switch (tensor.dtype()) {
    case DType::f32: type = nb::dtype<float>(); break;
    case DType::f16: type = {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1}; break;
    case DType::bf16:
      if (!as_torch) throw InputError("a bfloat16 result has no NumPy type: pass torch tensors to get one back");
      type = {static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
      break;
    default: throw InputError("a " + std::string(dtype_name(tensor.dtype())) + " result has no array type here");
  }
  std::vector<size_t> shape(tensor.shape().begin(), tensor.shape().end());
  std::vector<int64_t> strides(tensor.strides().begin(), tensor.strides().end());
  nb::capsule owner(new Tensor(tensor), [](void* held) noexcept { delete static_cast<Tensor*>(held); });
  if (as_torch) {
    return nb::ndarray<nb::pytorch>(tensor.data(), shape.size(), shape.data(), owner, strides.data(), type).cast();
  }
  return nb::ndarray<nb::numpy>(tensor.data(), shape.size(), shape.data(), owner, strides.data(), type).cast();
}

}  // namespace blockscope::python
