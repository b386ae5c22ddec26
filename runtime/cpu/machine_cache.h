// Files that keep what was measured on this machine between runs -- the CPU's peaks
// (cpu-peaks.json) and the GEMM plans (cpu-gemm-plans.json). Each is one JSON object keyed by
// everything the measurement depends on (machine_key), so a figure is reused only on the machine,
// libraries and thread count it was measured with; an entry that does not parse is measured anew.
//
// A cache costs a run nothing it would not spend measuring: a file over kMaxMachineCacheBytes is
// no cache (never read, never written: one note); a file read once and unchanged since is not
// read again in this process; a directory whose lock another process held past the wait is given
// up on for the rest of the process (one note, one wait). Every note is said once per process.
#pragma once

#include <cstdint>
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

// Whether `key` has machine_key's form: "<model> | isa <hash> | <library> | N threads", then
// only " | NAME=VALUE" parts. What tells a cache file of ours from another JSON file.
bool is_machine_key(const std::string& key);

// The most a cache file may hold: 4 MiB. A cache holds KiBs (a plan is ~300 bytes, a peak
// ~200); a larger file is something else (or a cache gone wrong) and is neither read nor
// written (issue 43: a 1 GiB file was read whole per GEMM shape, 47 s and 2 GB).
inline constexpr uint64_t kMaxMachineCacheBytes = uint64_t{4} << 20;

// Where cache `file_name` is kept: the file named by `env_variable` ("off": none, returned as
// ""), else $XDG_CACHE_HOME/blockscope/<file_name>, else ~/.cache/blockscope/<file_name>.
std::string machine_cache_path(const char* env_variable, const char* file_name);

// The cache at `path` as parsed JSON; a discarded value where it is missing, a FIFO or device
// (never opened), unreadable, over kMaxMachineCacheBytes (never read; a note, once) or not JSON.
// A file this process read before and that has not changed since is not read again. Callers
// check each entry they use.
nlohmann::json read_machine_cache(const std::string& path);

// Applies `update` to the cache in the file at `path` (an empty object where there is no file
// yet) and writes it back like every output (runtime/output_file.h: a temporary renamed into
// place, a symlink's target written and the link kept) -- only over a cache: a path that is a
// device, a FIFO or a directory, or a file whose content `is_cache` rejects (a config, a
// trace...) or that is over kMaxMachineCacheBytes, is left alone and said on stderr (once per
// process), naming `what`. Written under an flock of the file's directory (concurrent writers
// merge); where another process holds it past ~10 s, nothing is written, that is said once, and
// no cache in that directory is written again by this process (one wait in all). Failing to
// write only costs a measurement next time. True when the file was written.
bool update_machine_cache(const std::string& path, const std::string& what,
                          const std::function<bool(const nlohmann::json&)>& is_cache,
                          const std::function<void(nlohmann::json&)>& update);

}  // namespace blockscope::cpu
