// Arrays in and out of blockscope without copies: a caller's NumPy array or torch CPU tensor
// (anything with DLPack or the buffer protocol) as a Tensor over the same memory, and a
// blockscope Tensor as a NumPy array or torch tensor over its storage.
#pragma once

#include <nanobind/ndarray.h>

#include <string>

#include "python/bindings.h"
#include "runtime/tensor.h"

namespace blockscope::python {

// Inputs may be read-only arrays; outputs must be writable.
using InputArray = nb::ndarray<nb::ro>;
using OutputArray = nb::ndarray<>;

// The array's memory as a tensor of the CPU context: its shape, strides (in elements) and
// element type (float32, float16, bfloat16), the array kept alive as long as the tensor's
// storage is. InputError naming `argument` for an array on another device, another element
// type, a negative stride (a reversed view) or a zero stride (a broadcast dimension).
Tensor borrow(const InputArray& array, const char* argument);
Tensor borrow_output(const OutputArray& array, const char* argument);

// The tensor's storage as an array (no copy; the storage lives as long as the array): a NumPy
// array, or a torch tensor when `as_torch`. bfloat16 has no NumPy type: refused unless as_torch.
nb::object to_array(const Tensor& tensor, bool as_torch);

}  // namespace blockscope::python
