#include "model/safetensors.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "runtime/input_file.h"
#include "runtime/interrupt.h"
#include "runtime/output_file.h"

namespace blockscope {

namespace {

// The key comparisons this thread's reads made (safetensors_key_comparisons): every ordered
// structure of the reader compares names through CountingLess, so the work a read does is a
// count, not a time (test/safetensors_test.cpp holds it to n log n).
thread_local uint64_t t_key_comparisons = 0;

struct CountingLess {
  bool operator()(const std::string& a, const std::string& b) const {
    ++t_key_comparisons;
    return a < b;
  }
};

// Parsed headers are std::map-backed JSON (nlohmann::ordered_json looks keys up linearly,
// which made a header of 100k tensors take seconds); the header's key order is recorded by
// parse_header instead. The map compares through CountingLess (nlohmann passes its own
// comparator and allocator; they are replaced here).
template <class Key, class Value, class... Unused>
using CountedMap = std::map<Key, Value, CountingLess, std::allocator<std::pair<const Key, Value>>>;
using Json = nlohmann::basic_json<CountedMap>;

// Same cap as the reference implementation (safetensors' MAX_HEADER_SIZE): a header length
// beyond it is a corrupt file, not a reason to allocate 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::fp8_e4m3: return "F8_E4M3";
    case DType::fp8_e5m2: return "F8_E5M2";
  }
  return "?";
}

// The dtypes safetensors defines that blockscope cannot hold (reported as "unsupported"
// rather than "unknown", so the user knows the file is fine but needs converting).
bool is_other_safetensors_dtype(const std::string& name) {
  static const std::set<std::string> others = {"BOOL", "U8",  "I8",  "I16", "U16",     "I32",     "U32",
                                               "I64",  "U64", "F64", "F8_E8M0",
                                               "F4",   "F6_E2M3", "F6_E3M2", "C64"};
  return others.count(name) > 0;
}

std::string json_type_name(const Json& value) {
  if (value.is_number_unsigned()) return "non-negative integer";
  if (value.is_number_integer()) return "negative integer";
  if (value.is_number_float()) return "floating-point number";
  return value.type_name();  // "object", "array", "string", "boolean", "null"
}

// Builds error messages that always start with the file ("<path>: ...").
struct Reporter {
  const std::string& path;

  template <typename... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    throw InputError(detail::concat("safetensors file '", path, "': ", parts...));
  }
  template <typename... Parts>
  [[noreturn]] void fail_tensor(const std::string& name, const Parts&... parts) const {
    fail("tensor '", name, "': ", parts...);
  }
};

// Parses the header text, rejecting duplicate keys at any depth (nlohmann would silently keep
// one of them) and anything after the top-level value; `top_keys` gets the top-level keys in
// the order the file has them.
// Duplicate keys at any depth and the top-level keys in file order, from a SAX pass (nlohmann's
// parser callbacks would do it too, but rescan the parent object at every nested object's end:
// quadratic in the tensor count).
struct KeyAudit : nlohmann::json_sax<Json> {
  std::vector<std::set<std::string, CountingLess>> open_objects;  // the keys seen in each open object
  std::vector<std::string> top_keys;
  std::string duplicate;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    open_objects.emplace_back();
    return true;
  }
  bool key(string_t& name) override {
    if (!open_objects.back().insert(name).second && duplicate.empty()) duplicate = name;
    if (open_objects.size() == 1) top_keys.push_back(name);
    return true;
  }
  bool end_object() override {
    open_objects.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

// Parses the header text, rejecting duplicate keys at any depth (nlohmann would silently keep
// one of them) and anything after the top-level value; `top_keys` gets the top-level keys in
// the order the file has them.
Json parse_header(const std::string& text, const Reporter& report, std::vector<std::string>* top_keys) {
  // nlohmann stops at a NUL byte as if the input ended there, which would hide whatever
  // follows; JSON allows no raw NUL anywhere, so refuse it up front.
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) {
    report.fail("header contains a NUL byte at byte ", nul, " (JSON allows none; padding must be spaces)");
  }

  Json header;
  try {
    header = Json::parse(text);
  } catch (const Json::parse_error& error) {
    // Tell "a valid JSON value followed by garbage" apart from "not JSON at all": the
    // non-strict SAX parse accepts the first and stops at the value's end.
    KeyAudit accept_all;  // accepts any JSON
    const bool prefix_is_json = Json::sax_parse(text, &accept_all, Json::input_format_t::json, /*strict=*/false);
    if (prefix_is_json) {
      report.fail("header has bytes after its JSON object (byte ", error.byte, " of ", text.size(),
                  "); only space padding may follow it");
    }
    report.fail("header is not valid JSON: ", error.what());
  } catch (const Json::exception& error) {  // out_of_range 406: a number like 1e400 no double holds
    report.fail("header is not valid JSON: ", error.what());
  }
  KeyAudit audit;
  Json::sax_parse(text, &audit);
  if (!audit.duplicate.empty()) report.fail("header has the key '", audit.duplicate, "' more than once");
  *top_keys = std::move(audit.top_keys);
  return header;
}

// A JSON value that must be a non-negative integer fitting in int64.
uint64_t as_size(const Json& value, const Reporter& report, const std::string& tensor, const char* what) {
  if (!value.is_number_unsigned()) {
    report.fail_tensor(tensor, what, " must be a non-negative integer, got ", json_type_name(value), " ", value.dump());
  }
  const uint64_t number = value.get<uint64_t>();
  if (number > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    report.fail_tensor(tensor, what, " ", number, " is too large");
  }
  return number;
}

// Where one tensor's bytes lie in the data section (validated).
struct TensorLocation {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

TensorLocation parse_entry(const std::string& name, const Json& info, uint64_t data_bytes, const Reporter& report) {
  if (!info.is_object()) report.fail_tensor(name, "entry must be an object, got ", json_type_name(info));
  for (const char* required : {"dtype", "shape", "data_offsets"}) {
    if (!info.contains(required)) report.fail_tensor(name, "missing \"", required, "\"");
  }
  for (const auto& item : info.items()) {
    if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets") {
      report.fail_tensor(name, "unexpected key \"", item.key(), "\" (expected exactly dtype, shape, data_offsets)");
    }
  }

  TensorLocation location;
  location.name = name;

  const Json& dtype = info.at("dtype");
  if (!dtype.is_string()) report.fail_tensor(name, "dtype must be a string, got ", json_type_name(dtype));
  const std::string dtype_text = dtype.get<std::string>();
  const DType* known = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                                    [&](DType d) { return dtype_text == safetensors_dtype_name(d); });
  if (known != std::end(kDTypes)) {
    location.dtype = *known;
  } else if (is_other_safetensors_dtype(dtype_text)) {
    report.fail_tensor(name, "unsupported dtype ", dtype_text, " (blockscope reads F32, F16, BF16, F8_E4M3 and F8_E5M2)");
  } else {
    report.fail_tensor(name, "unknown dtype \"", dtype_text, "\"");
  }

  const Json& shape = info.at("shape");
  if (!shape.is_array()) report.fail_tensor(name, "shape must be an array, got ", json_type_name(shape));
  // numel of the non-zero dimensions must fit in int64 (so shape arithmetic elsewhere cannot
  // overflow even for shapes like [2^40, 2^40, 0]).
  uint64_t nonzero_numel = 1;
  bool has_zero_dim = false;
  for (const auto& dim_json : shape) {
    const uint64_t dim = as_size(dim_json, report, name, "shape dimension");
    location.shape.push_back(static_cast<int64_t>(dim));
    if (dim == 0) {
      has_zero_dim = true;
    } else if (__builtin_mul_overflow(nonzero_numel, dim, &nonzero_numel) ||
               nonzero_numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      report.fail_tensor(name, "shape ", shape.dump(), " has too many elements");
    }
  }

  const Json& offsets = info.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2) {
    report.fail_tensor(name, "data_offsets must be an array [begin, end], got ", offsets.dump());
  }
  location.begin = as_size(offsets[0], report, name, "data_offsets begin");
  location.end = as_size(offsets[1], report, name, "data_offsets end");
  if (location.begin > location.end) {
    report.fail_tensor(name, "data_offsets [", location.begin, ", ", location.end, "] end before they begin");
  }
  if (location.end > data_bytes) {
    report.fail_tensor(name, "data_offsets [", location.begin, ", ", location.end, "] go past the data section (",
                       data_bytes, " bytes)");
  }

  uint64_t expected_bytes = 0;
  if (!has_zero_dim && __builtin_mul_overflow(nonzero_numel, dtype_size(location.dtype), &expected_bytes)) {
    report.fail_tensor(name, "shape ", shape.dump(), " has too many elements");
  }
  if (expected_bytes != location.end - location.begin) {
    report.fail_tensor(name, "shape ", shape_str(location.shape), " of ", dtype_text, " needs ", expected_bytes,
                       " bytes, but data_offsets [", location.begin, ", ", location.end, "] hold ",
                       location.end - location.begin);
  }
  return location;
}

std::map<std::string, std::string> parse_metadata(const Json& value, const Reporter& report) {
  std::map<std::string, std::string> metadata;
  if (value.is_null()) return metadata;  // the reference implementation accepts null
  if (!value.is_object()) report.fail("\"__metadata__\" must be an object of strings, got ", json_type_name(value));
  for (const auto& item : value.items()) {
    if (!item.value().is_string()) {
      report.fail("\"__metadata__\" key '", item.key(), "' must map to a string, got ", json_type_name(item.value()));
    }
    metadata[item.key()] = item.value().get<std::string>();
  }
  return metadata;
}

// Rejects two tensors whose byte ranges share a byte (empty ranges overlap nothing).
void check_no_overlap(std::vector<TensorLocation> locations, const Reporter& report) {
  locations.erase(std::remove_if(locations.begin(), locations.end(),
                                 [](const TensorLocation& l) { return l.begin == l.end; }),
                  locations.end());
  std::sort(locations.begin(), locations.end(),
            [](const TensorLocation& a, const TensorLocation& b) {
              ++t_key_comparisons;
              return a.begin < b.begin;
            });
  for (size_t i = 1; i < locations.size(); ++i) {
    const TensorLocation& previous = locations[i - 1];
    const TensorLocation& current = locations[i];
    if (current.begin < previous.end) {
      report.fail("tensors '", previous.name, "' [", previous.begin, ", ", previous.end, "] and '", current.name,
                  "' [", current.begin, ", ", current.end, "] overlap in the data section");
    }
  }
}

uint64_t read_u64_le(const unsigned char* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

void write_u64_le(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// The elements of `t` in row-major order as raw bytes, bit for bit (no float round trip, so
// NaN payloads and -0 survive). Non-CPU storage is copied to the host first.
std::vector<uint8_t> contiguous_host_bytes(const Tensor& t) {
  std::vector<uint8_t> out(t.nbytes());
  if (out.empty()) return out;
  const size_t element = dtype_size(t.dtype());
  const bool on_host = t.device().is_cpu();
  if (t.is_contiguous()) {
    if (on_host) {
      std::memcpy(out.data(), t.data(), out.size());
    } else {
      t.backend().copy_to_host(out.data(), t.data(), out.size());
    }
    return out;
  }
  // Strided: gather from the whole storage (a host copy of it when on a device).
  std::vector<uint8_t> host_storage;
  const uint8_t* base = static_cast<const uint8_t*>(t.storage()->data());
  if (!on_host) {
    host_storage.resize(t.storage()->bytes());
    t.backend().copy_to_host(host_storage.data(), t.storage()->data(), host_storage.size());
    base = host_storage.data();
  }
  const int64_t dims = t.dim();
  std::vector<int64_t> index(dims, 0);
  for (size_t n = 0; n < static_cast<size_t>(t.numel()); ++n) {
    int64_t offset = t.offset();
    for (int64_t d = 0; d < dims; ++d) offset += index[d] * t.stride(d);
    std::memcpy(out.data() + n * element, base + offset * static_cast<int64_t>(element), element);
    for (int64_t d = dims - 1; d >= 0; --d) {  // advance the row-major index
      if (++index[d] < t.size(d)) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  const auto it = index.find(name);
  if (it != index.end()) return &tensors[it->second];
  for (const auto& entry : tensors) {  // a file assembled by hand, without the index
    ++t_key_comparisons;
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

uint64_t safetensors_key_comparisons() { return t_key_comparisons; }

SafetensorsFile read_safetensors(const std::string& path, const std::set<std::string>* only) {
  const Reporter report{path};
  // A regular file only: a device would be read without end, a FIFO block the run.
  if (const std::string problem = input_file_problem(path); !problem.empty()) report.fail(problem);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(detail::concat("cannot open safetensors file '", path, "': ", std::strerror(errno)));
  in.seekg(0, std::ios::end);
  const std::streamoff file_size_signed = in.tellg();
  if (file_size_signed < 0) report.fail("cannot determine the file size");
  const uint64_t file_size = static_cast<uint64_t>(file_size_signed);
  in.seekg(0, std::ios::beg);

  if (file_size < 8) report.fail("file is ", file_size, " bytes, too short for the 8-byte header length");
  unsigned char length_bytes[8];
  if (!in.read(reinterpret_cast<char*>(length_bytes), 8)) report.fail("cannot read the header length");
  const uint64_t header_bytes = read_u64_le(length_bytes);
  if (header_bytes > file_size - 8) {
    report.fail("header length ", header_bytes, " goes past the end of the file (", file_size - 8,
                " bytes after the length field)");
  }
  if (header_bytes > kMaxHeaderBytes) report.fail("header length ", header_bytes, " exceeds the ", kMaxHeaderBytes, "-byte limit");

  std::string header_text(header_bytes, '\0');
  if (!in.read(header_text.data(), static_cast<std::streamsize>(header_bytes))) report.fail("cannot read the header");
  std::vector<std::string> keys;
  const Json header = parse_header(header_text, report, &keys);
  if (!header.is_object()) report.fail("header must be a JSON object, got ", json_type_name(header));

  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_bytes = file_size - data_start;
  SafetensorsFile file;
  std::vector<TensorLocation> locations;
  for (const std::string& key : keys) {
    if (key == kMetadataKey) {
      file.metadata = parse_metadata(header.at(key), report);
    } else {
      locations.push_back(parse_entry(key, header.at(key), data_bytes, report));
    }
  }
  check_no_overlap(locations, report);
  // Bytes after the last tensor belong to nothing: a truncated header or a concatenated file.
  uint64_t used = 0;
  for (const TensorLocation& location : locations) used = std::max(used, location.end);
  if (used < data_bytes) {
    report.fail("the data section has ", data_bytes - used, " bytes after the last tensor's (it holds ", data_bytes,
                ", the tensors use ", used, ")");
  }

  // Only now, with every range known to lie inside the file, read the data.
  file.tensors.reserve(locations.size());
  for (const TensorLocation& location : locations) {
    SafetensorsEntry entry;
    entry.name = location.name;
    entry.dtype = location.dtype;
    entry.shape = location.shape;
    entry.loaded = only == nullptr || only->count(location.name) > 0;
    if (entry.loaded) entry.bytes.resize(location.end - location.begin);
    if (!entry.bytes.empty()) {
      in.seekg(static_cast<std::streamoff>(data_start + location.begin), std::ios::beg);
      // In chunks of 1 MiB, an interrupt answered between them (one tensor may be gigabytes).
      constexpr size_t kChunk = size_t{1} << 20;
      for (size_t done = 0; done < entry.bytes.size(); done += kChunk) {
        check_interrupted(("while reading " + path).c_str());
        const size_t chunk = std::min(kChunk, entry.bytes.size() - done);
        if (!in.read(reinterpret_cast<char*>(entry.bytes.data()) + done, static_cast<std::streamsize>(chunk))) {
          report.fail_tensor(location.name, "cannot read its ", entry.bytes.size(), " bytes");
        }
      }
    }
    file.index[entry.name] = file.tensors.size();
    file.tensors.push_back(std::move(entry));
  }
  return file;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // Header: __metadata__ first, then the tensors in the given order with contiguous data
  // (the key order the reference implementation writes), as text: a JSON object's keys are
  // kept in order without an ordered container.
  std::string header_text = "{";
  const auto add_entry = [&](const std::string& key, const Json& value) {
    header_text += (header_text.size() > 1 ? "," : "") + Json(key).dump() + ":" + value.dump();
  };
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    add_entry(kMetadataKey, meta);
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    BS_CHECK_INPUT(name != kMetadataKey, "cannot write '", path, "': a tensor may not be named \"__metadata__\"");
    BS_CHECK_INPUT(names.insert(name).second, "cannot write '", path, "': tensor name '", name, "' appears twice");
    BS_CHECK_INPUT(tensor.defined(), "cannot write '", path, "': tensor '", name, "' is undefined");
    // Keys in the reference's order: dtype, shape, data_offsets.
    header_text += (header_text.size() > 1 ? "," : "") + Json(name).dump() + ":{\"dtype\":" +
                   Json(safetensors_dtype_name(tensor.dtype())).dump() + ",\"shape\":" + Json(tensor.shape()).dump() +
                   ",\"data_offsets\":" + Json({offset, offset + tensor.nbytes()}).dump() + "}";
    offset += tensor.nbytes();
  }
  header_text += "}";
  // Pad with spaces so the data section starts 8-byte aligned (as the reference does).
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  std::string prefix;
  write_u64_le(prefix, header_text.size());
  prefix += header_text;

  // A temporary renamed into place (runtime/output_file.h): a failure, a device copy error or
  // bad_alloc included, leaves `path` untouched.
  OutputFile out(path, "safetensors file");
  out.write(prefix);
  for (const auto& [name, tensor] : tensors) {
    const std::vector<uint8_t> bytes = contiguous_host_bytes(tensor);
    out.write(bytes.data(), bytes.size());
  }
  out.commit();
}

void check_finite(const std::vector<float>& values, DType dtype, const std::string& what) {
  // Above the dtype's largest finite value a value may round to infinity (f16: 65504; from
  // 65520 on it does); only those need the conversion.
  const float largest = static_cast<float>(dtype_max_finite(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      throw InputError(what + " holds " + fmt::format("{}", values[i]) + " at index " + std::to_string(i) +
                       " (the first non-finite value): every output would be NaN");
    }
    if (std::fabs(values[i]) > largest && !std::isfinite(round_to(dtype, values[i]))) {
      throw InputError(what + " holds " + fmt::format("{}", values[i]) + " at index " + std::to_string(i) +
                       ", which is " + (values[i] > 0 ? "inf" : "-inf") + " in " + dtype_name(dtype) +
                       " (the run's dtype; its largest finite value is " + fmt::format("{}", largest) +
                       "): every output would be inf or NaN");
    }
  }
}

Tensor tensor_from_entry(Context& ctx, const SafetensorsEntry& entry) {
  for (int64_t dim : entry.shape) {
    BS_CHECK_INPUT(dim >= 0, "safetensors entry '", entry.name, "' has a negative dimension in ", shape_str(entry.shape));
  }
  Tensor out = ctx.empty(entry.shape, entry.dtype);
  BS_CHECK(entry.loaded, "safetensors entry '", entry.name, "' was listed but not read (read_safetensors' `only`)");
  BS_CHECK_INPUT(entry.bytes.size() == out.nbytes(), "safetensors entry '", entry.name, "' holds ", entry.bytes.size(),
                 " bytes, but ", dtype_name(entry.dtype), shape_str(entry.shape), " needs ", out.nbytes());
  if (!entry.bytes.empty()) ctx.backend().copy_to_device(out.data(), entry.bytes.data(), entry.bytes.size());
  return out;
}

}  // namespace blockscope
