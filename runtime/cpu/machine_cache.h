// Files that keep what was measured on this machine between runs -- the CPU's peaks
// (cpu-peaks.json) and the GEMM plans (cpu-gemm-plans.json). Each is one JSON object keyed by
// everything the measurement depends on (machine_key), so a figure is reused only on the machine,
// libraries and thread count it was measured with; an entry that does not parse is measured anew.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace blockscope::cpu {

// What a CPU measurement depends on:
//   "<CPU model> | isa <hash of the CPU's feature flags> | <GEMM library and version> | N threads"
// plus any variable that makes the libraries pick other kernels on the same CPU
// (ONEDNN_MAX_CPU_ISA, DNNL_MAX_CPU_ISA, OPENBLAS_CORETYPE). A new CPU (or a VM exposing other
// features), a library upgrade or another thread count gives another key.
std::string machine_key(int threads);

// Where cache `file_name` is kept: the file named by `env_variable` ("off": none, returned as
// ""), else $XDG_CACHE_HOME/blockscope/<file_name>, else ~/.cache/blockscope/<file_name>.
std::string machine_cache_path(const char* env_variable, const char* file_name);

// The cache at `path` as parsed JSON; a discarded value where it is missing, a FIFO or device
// (never opened), unreadable or not JSON. Callers check each entry they use.
nlohmann::json read_machine_cache(const std::string& path);

// Applies `update` to the cache in the file at `path` (an empty object where there is no file
// yet) and writes it back like every output (runtime/output_file.h: a temporary renamed into
// place, a symlink's target written and the link kept) -- only over a cache: a path that is a
// device, a FIFO or a directory, or a file whose content `is_cache` rejects (a config, a
// trace...), is left alone and said on stderr, naming `what`. Failing to write only costs a
// measurement next time. True when the file was written.
bool update_machine_cache(const std::string& path, const std::string& what,
                          const std::function<bool(const nlohmann::json&)>& is_cache,
                          const std::function<void(nlohmann::json&)>& update);

}  // namespace blockscope::cpu
