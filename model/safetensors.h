// safetensors files (https://huggingface.co/docs/safetensors): read strictly, write atomically.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON header, then the data
// section. The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets relative to the data section) plus an optional "__metadata__" string->string map.
//
// Reading validates everything before any byte is interpreted (lengths, JSON, each entry's
// keys and types, dtype, shape, offsets inside the data section, no overlaps, size = numel x
// element size, unique names); every violation is an invalid_input Error naming the file and
// the tensor or key. Only F32, F16 and BF16 are supported (the runtime's dtypes).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/context.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace blockscope {

// One tensor of a file: its raw little-endian bytes, row-major contiguous.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  std::vector<uint8_t> bytes;
  bool loaded = true;  // false: listed from the header only (read_safetensors' `only`), no bytes
};

struct SafetensorsFile {
  std::vector<SafetensorsEntry> tensors;        // in header order (write_safetensors: as given)
  std::map<std::string, std::string> metadata;  // "__metadata__"
  const SafetensorsEntry* find(const std::string& name) const;  // null if absent
  std::map<std::string, size_t> index;          // name -> position in tensors (read_safetensors)
};

// InputError "<what> holds nan at index 12 (the first non-finite value)" when `values` has a
// NaN or an infinity, or "... holds 70000 at index 3, which is inf in f16 ..." when a value
// overflows the run's `dtype` (checked after the conversion a load does): a weight or input like
// that makes every output NaN or inf.
void check_finite(const std::vector<float>& values, DType dtype, const std::string& what);

// Reads and validates a file: the whole header, and the data of the tensors named in `only`
// (every tensor when null; none for an empty set: the header alone). A checkpoint with
// tensors a block does not use — a 3 GB embedding beside the layers — costs only its header.
// Throws Error(invalid_input) naming `path` on any problem.
SafetensorsFile read_safetensors(const std::string& path, const std::set<std::string>* only = nullptr);

// The name comparisons read_safetensors and SafetensorsFile::find have made in this thread
// (header parse, duplicate check, lookups, overlap sort): the reader's work as a count, which the
// tests hold to n log n in the tensor count without timing anything.
uint64_t safetensors_key_comparisons();

// Writes `tensors` in the given order (names must be unique and not "__metadata__"); strided
// tensors are written contiguously, non-CPU tensors copied to the host first. Written as an
// OutputFile (runtime/output_file.h): a failure leaves no partial file at `path`.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// A contiguous tensor on ctx's device holding the entry's bytes (a copy).
Tensor tensor_from_entry(Context& ctx, const SafetensorsEntry& entry);

}  // namespace blockscope
