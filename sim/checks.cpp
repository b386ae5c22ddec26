// What the simulated GPU checks of every memory access a kernel makes (BLOCKSCOPE_SIM_CHECKS).
//
// nvcc-sim compiles kernel code with the host compiler's ThreadSanitizer instrumentation
// (-fsanitize=thread without its runtime, as the Linux kernel's KCSAN does): every load and store
// calls __tsan_readN / __tsan_writeN (…_unaligned_…, …_volatile_…, …_range) with its address
// (access_hooks.cpp is that runtime). Outside a kernel, and for the thread's own stack, a call
// returns at once; otherwise the access is
//   memcheck  inside the block's shared memory (its dynamic region or one __shared__ variable,
//             never a redzone), or a live allocation of this device (or a peer's, or pinned or
//             managed memory), or a __device__/__constant__/__managed__ variable, or read-only data
//             of the program; aligned to its size when the compiler says the type is (a float4
//             at an address not 16-byte aligned faults, as cudaErrorMisalignedAddress); no write
//             to __constant__
//   race      against the last writer and the readers of each byte since the block's last
//             __syncthreads (shared memory, and global memory per block): two threads, one of
//             them writing, are a hazard unless a __syncwarp covering both (same warp) came
//             between; atomics are not accesses here (atomic_begin/atomic_end); between the
//             blocks of one launch, per byte of global memory, unless both blocks synchronised
//             (atomic, fence, volatile access) after the first access, or a grid barrier came
//   initcheck a global load of a byte of a cudaMalloc/cudaMallocAsync/graph allocation that
//             nothing wrote (WrittenBytes, sim.h); stores and atomics mark bytes written
//   streams   records each global access into the running op's log (stream_order.h), which
//             streams_check.cpp compares with other streams' unordered work when the op ends
// and, with a random schedule, sometimes a switch to another thread.
//
// A fault found here cannot be thrown: the instrumented call sites are nothrow to the compiler.
// The thread is abandoned instead (its stack is never unwound) and the grid ends with the fault.
//
// This file: memcheck, initcheck, the streams log and check_access, which runs them all on one
// access; the race check is race_check.cpp, the entry points the instrumentation calls are
// access_hooks.cpp (sim/checks_internal.h).
#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "sim/checks_internal.h"
#include "sim/device_heap.h"
#include "sim/symbols.h"

namespace blockscope::sim::exec {
namespace {

// ---- Shared memory ---------------------------------------------------------------------------------
const SharedVariable* variable_containing(const BlockRun& b, size_t offset) {
  auto it = std::upper_bound(b.variables.begin(), b.variables.end(), offset,
                             [](size_t o, const SharedVariable& v) { return o < v.offset; });
  if (it == b.variables.begin()) return nullptr;
  --it;
  return offset < it->offset + it->site->size ? &*it : nullptr;
}

// For a wide access into a shared variable declared with a smaller alignment (a byte array read
// as words): the simulator places it as declared, so the access is misaligned here; on a GPU it
// is whenever ptxas places it so, which nothing in the declaration prevents.
std::string underaligned_variable_hint(const BlockRun& b, const void* address, size_t n) {
  const uintptr_t offset = reinterpret_cast<uintptr_t>(address) - reinterpret_cast<uintptr_t>(b.smem);
  if (offset >= b.smem_capacity) return "";
  const SharedVariable* v = variable_containing(b, offset);
  if (v == nullptr || v->site->align >= n) return "";
  return " wherever it is placed off a multiple of " + std::to_string(n) + ": `" + std::string(v->site->name) +
         "` is declared with alignment " + std::to_string(v->site->align) +
         " only, which the simulator keeps to (declare it __align__(" + std::to_string(n) + ") or of a " +
         std::to_string(n) + "-byte type)";
}

std::string variable_label(const SharedVariable& v) {
  return "`" + std::string(v.site->name) + "` (" + v.site->file + ":" + std::to_string(v.site->line) + ", " +
         bytes_word(v.site->size) + ")";
}

// True when [offset, offset + n) lies inside the dynamic region or inside one variable; that
// region is *begin, *end.
bool shared_range_valid(const BlockRun& b, size_t offset, size_t n, size_t* begin, size_t* end) {
  const size_t dynamic = b.grid->launch->dynamic_smem;
  if (offset >= b.dynamic_offset && offset + n <= b.dynamic_offset + dynamic) {
    *begin = b.dynamic_offset, *end = b.dynamic_offset + dynamic;
    return true;
  }
  const SharedVariable* v = variable_containing(b, offset);
  if (v == nullptr || offset + n > v->offset + v->site->size) return false;
  *begin = v->offset, *end = v->offset + v->site->size;
  return true;
}

// Why [offset, offset + n) is not inside one region: it starts in one and runs past its end, or it
// starts in a redzone.
std::string shared_overrun(const BlockRun& b, size_t offset, size_t n) {
  const size_t dynamic = b.grid->launch->dynamic_smem;
  if (offset >= b.dynamic_offset && offset < b.dynamic_offset + dynamic) {
    return "it runs " + bytes_word(offset + n - (b.dynamic_offset + dynamic)) +
           " past the end of the dynamic shared memory (" + bytes_word(dynamic) + ", access at +" +
           std::to_string(offset - b.dynamic_offset) + ")";
  }
  if (const SharedVariable* v = variable_containing(b, offset)) {
    return "it runs " + bytes_word(offset + n - (v->offset + v->site->size)) + " past the end of " + variable_label(*v) +
           " (access at +" + std::to_string(offset - v->offset) + ")";
  }
  return describe_address(b, reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(b.smem) + offset));
}

// ---- Global memory -----------------------------------------------------------------------------------
const AllocationRange* allocation_containing(const GridRun& g, uintptr_t a) {
  auto it = std::upper_bound(g.allocations.begin(), g.allocations.end(), a,
                             [](uintptr_t x, const AllocationRange& r) { return x < r.base; });
  if (it == g.allocations.begin()) return nullptr;
  --it;
  return a < it->end ? &*it : nullptr;
}

// "(the nearest allocation, 4096 bytes at 0x…, ends 4 bytes before it)" for an address in none.
std::string nearest_allocation(const GridRun& g, uintptr_t a) {
  auto it = std::upper_bound(g.allocations.begin(), g.allocations.end(), a,
                             [](uintptr_t x, const AllocationRange& r) { return x < r.base; });
  std::string best;
  uintptr_t distance = UINTPTR_MAX;
  if (it != g.allocations.begin()) {
    const AllocationRange& r = *std::prev(it);
    if (a - r.end < distance) {
      distance = a - r.end;
      best = distance == 0 ? "; it is just past the end of a " + bytes_word(r.end - r.base) + " allocation at " +
                                 hex_address(r.base)
                           : "; the nearest allocation (" + bytes_word(r.end - r.base) + " at " + hex_address(r.base) +
                                 ") ends " + bytes_word(distance) + " before it";
    }
  }
  if (it != g.allocations.end() && it->base - a < distance) {
    distance = it->base - a;
    best = "; the nearest allocation (" + bytes_word(it->end - it->base) + " at " + hex_address(it->base) +
           ") starts " + bytes_word(distance) + " after it";
  }
  return distance <= (1u << 20) ? best : std::string();
}

const char* kind_name(AllocationInfo::Kind kind) {
  switch (kind) {
    case AllocationInfo::Kind::device: return "cudaMalloc";
    case AllocationInfo::Kind::pool: return "cudaMallocAsync";
    case AllocationInfo::Kind::graph: return "graph allocation";
    case AllocationInfo::Kind::pinned_host: return "cudaMallocHost";
    case AllocationInfo::Kind::registered_host: return "cudaHostRegister";
    case AllocationInfo::Kind::managed: return "cudaMallocManaged";
  }
  return "?";
}

void global_access(GridRun& g, const BlockRun& b, SimThread& t, uintptr_t a, size_t n, bool write,
                   const void* pc) {
  if (a >= t.global_begin && a + n <= t.global_end) return;  // inside the allocation it used last
  const char* verb = write ? "write" : "read";
  if (const AllocationRange* r = allocation_containing(g, a)) {
    if (g.checks.memcheck) {
      if (a + n > r->end) {
        hook_fault(t, cudaErrorIllegalAddress, [&] {
    return std::string("out-of-bounds global ") + verb + " of " + bytes_word(n) + " at " + hex_address(a) +
                       at_line(pc) + ": it runs " + bytes_word(a + n - r->end) + " past the end of a " +
                       bytes_word(r->end - r->base) + " " + kind_name(r->kind) + " allocation at " + hex_address(r->base);
  });
      }
      const bool everywhere = r->kind == AllocationInfo::Kind::pinned_host ||
                              r->kind == AllocationInfo::Kind::registered_host || r->kind == AllocationInfo::Kind::managed;
      if (!everywhere && r->device != g.device && !peer_access_enabled(g.device, r->device)) {
        hook_fault(t, cudaErrorIllegalAddress, [&] {
    return std::string("global ") + verb + " at " + hex_address(a) + at_line(pc) + " of device " +
                       std::to_string(r->device) + "'s memory (" + kind_name(r->kind) + ", " +
                       bytes_word(r->end - r->base) + " at " + hex_address(r->base) + ") from a kernel on device " +
                       std::to_string(g.device) + " without peer access (cudaDeviceEnablePeerAccess)";
  });
      }
    }
    t.global_begin = r->base;  // checked: later accesses inside it need no lookup
    t.global_end = r->end;
    t.global_written = r->written;
    return;
  }
  if (const SymbolRange* s = find_symbol(a)) {
    if (g.checks.memcheck) {
      if (a + n > s->end) {
        hook_fault(t, cudaErrorIllegalAddress, [&] {
    return std::string("out-of-bounds ") + verb + " of " + bytes_word(n) + " at " + hex_address(a) + at_line(pc) +
                       ": it runs " + bytes_word(a + n - s->end) + " past the end of __device__ variable `" + s->name + "`";
  });
      }
      if (write && s->constant) {
        hook_fault(t, cudaErrorIllegalAddress, [&] {
    return std::string("write of ") + bytes_word(n) + " to __constant__ variable `" + s->name + "`" + at_line(pc) +
                       ": constant memory is read-only in kernels (cudaMemcpyToSymbol writes it)";
  });
      }
    }
    return;
  }
  if (!g.checks.memcheck) return;
  // The device heap (kernels' malloc and new): its blocks come and go during the grid.
  const HeapLookup heap = device_heap_lookup(g.device, a);
  if (heap.kind == HeapLookup::live && a + n <= heap.base + heap.size) return;
  if (heap.kind != HeapLookup::outside) {
    hook_fault(t, cudaErrorIllegalAddress, [&] {
      const std::string block = bytes_word(heap.size) + " device-heap block (a kernel's malloc or new) at " +
                                hex_address(heap.base);
      std::string what = std::string("illegal device-heap ") + verb + " of " + bytes_word(n) + " at " + hex_address(a) +
                         at_line(pc) + ": ";
      if (heap.kind == HeapLookup::freed) return what + "use after free: it lies in a " + block + " that was freed";
      if (heap.kind == HeapLookup::live || heap.base != 0) {
        return what + "out of bounds: it runs " + bytes_word(a + n - heap.base - heap.size) + " past the end of a " +
               block;
      }
      return what + "it lies in the device heap but in no block malloc or new gave";
    });
  }
  if (!write && readonly_image(a, n)) return;  // string literals, constant tables
  for (const auto& slot : g.slots) {
    if (slot.get() != &b && slot->active && a - reinterpret_cast<uintptr_t>(slot->smem) < slot->smem_capacity) {
      hook_fault(t, cudaErrorIllegalAddress, [&] {
    return std::string(verb) + " at " + hex_address(a) + at_line(pc) + ": shared memory of another block (" +
                     where(*slot) + ")";
  });
    }
  }
  hook_fault(t, cudaErrorIllegalAddress, [&] {
    return std::string("illegal ") + verb + " of " + bytes_word(n) + " at " + hex_address(a) + at_line(pc) +
                 ": not memory of the simulated GPU (no live allocation, __device__ variable, shared memory of this "
                 "block or read-only data there: host memory, freed memory, another thread's local memory?)" +
                 nearest_allocation(g, a);
  });
}

// ---- initcheck ---------------------------------------------------------------------------------------
// A kernel store marks its bytes written; a load of a byte nothing wrote since the allocation (no
// cudaMemset, cudaMemcpy, cuBLASLt/NCCL output or kernel store) is reported, as compute-sanitizer's
// initcheck reports an uninitialized __global__ memory read.
void initcheck_access(const GridRun& g, SimThread& t, WrittenBytes& w, uintptr_t a, size_t n, bool write,
                      const void* pc) {
  const size_t offset = a - t.global_begin;
  if (write) {
    w.mark(offset, n);
    return;
  }
  const size_t first = w.first_unwritten(offset, n);
  if (first == SIZE_MAX) return;
  hook_fault(t, cudaErrorLaunchFailure, [&] {
    const std::string allocated = at_line(w.allocated_at);
    return std::string("uninitialized global-memory read (initcheck): this thread reads ") + bytes_word(n) + " at " +
           describe_address(*t.block, reinterpret_cast<const void*>(a)) + at_line(pc) + "; byte +" +
           std::to_string(first) + " of the allocation" + (allocated.empty() ? "" : " (cudaMalloc'd" + allocated + ")") +
           " was never written since it was allocated: no cudaMemset, cudaMemcpy or kernel store covered it (a GPU "
           "returns whatever the memory held)";
  });
  (void)g;
}

// The op log's entry for the allocation at `base`. A thread keeps the last one it used, but every
// thread starts without one and most touch two or three allocations in turn: the grid keeps the
// last few, so that a lookup in the log's map is rare (it was a tenth of a simple kernel's time).
// Entries stay where they are while the grid runs (an unordered_map's nodes do not move).
detail::OpAccesses* log_entry_of(GridRun& g, uintptr_t base) {
  for (GridRun::LogSlot& slot : g.log_slots) {
    if (slot.entry != nullptr && slot.base == base) return slot.entry;
  }
  GridRun::LogSlot& slot = g.log_slots[g.log_next++ % GridRun::kLogSlots];
  slot = GridRun::LogSlot{base, &g.op_log->by_allocation[base]};
  return slot.entry;
}

}  // namespace

void check_access(SimThread& t, const void* address, size_t n, bool write, bool aligned, const void* pc,
                  bool may_switch) {
  settle_write_at_access(t);
  BlockRun& b = *t.block;
  GridRun& g = *b.grid;
  if (may_switch) maybe_preempt(g, t);  // before the access: the interleaving a GPU could have
  const auto a = reinterpret_cast<uintptr_t>(address);
  if (g.checks.memcheck && aligned && n > 1 && (a & (n - 1)) != 0) {  // n: 2, 4, 8 or 16
    hook_fault(t, cudaErrorMisalignedAddress, [&] {
    return std::string("misaligned ") + std::to_string(n) + "-byte " + (write ? "write" : "read") + at_line(pc) +
                      ": " + describe_address(b, address) + " is " + std::to_string(a % n) +
                      " bytes past a multiple of " + std::to_string(n) + "; a GPU faults (cudaErrorMisalignedAddress)" +
                      underaligned_variable_hint(b, address, n);
  });
  }
  const uintptr_t offset = a - reinterpret_cast<uintptr_t>(b.smem);
  const bool shared = offset < b.smem_capacity;
  if (shared) {
    if (g.checks.memcheck && !(offset >= t.shared_begin && offset + n <= t.shared_end) &&
        !shared_range_valid(b, offset, n, &t.shared_begin, &t.shared_end)) {
      hook_fault(t, cudaErrorIllegalAddress, [&] {
    return std::string("out-of-bounds shared-memory ") + (write ? "write" : "read") + " of " + bytes_word(n) +
                        at_line(pc) + ": " + shared_overrun(b, offset, n);
  });
    }
  } else {
    global_access(g, b, t, a, n, write, pc);
    if (a >= t.global_begin && a + n <= t.global_end) {
      if (g.checks.initcheck && t.global_written != nullptr && (write || t.global_written->unwritten != 0)) {
        initcheck_access(g, t, *t.global_written, a, n, write, pc);
      }
      if (g.op_log != nullptr) stream_log(g, t, a, n, write, pc);
    }
  }
  if (g.checks.race && (!shared || !b.shadow.empty())) {
    if (write && n <= sizeof t.pending_write.old) {
      SimThread::PendingWrite& w = t.pending_write;
      w.active = true;
      w.address = a;
      w.bytes = n;
      std::memcpy(w.old, address, n);
      w.pc = pc;
      w.sync = t.sync_access;
    } else if (shared) {
      race_check(b, t, &b.shadow[offset], &b.shadow_pcs[offset], n, write, pc, a, b.epoch);
    } else {
      global_race_check(g, b, t, a, n, write, pc);
    }
  }
  if (write) note_progress(g);
}

void stream_log(GridRun& g, SimThread& t, uintptr_t a, size_t n, bool write, const void* pc) {
  if (g.op_log == nullptr) return;
  if (t.log_entry == nullptr || t.log_base != t.global_begin) {
    t.log_entry = log_entry_of(g, t.global_begin);
    t.log_base = t.global_begin;
  }
  (write ? t.log_entry->writes : t.log_entry->reads).add(a, a + n, pc, t.block->linear_block, t.linear);
}

std::string describe_address(const BlockRun& b, const void* address) {
  const auto a = reinterpret_cast<uintptr_t>(address);
  const uintptr_t offset = a - reinterpret_cast<uintptr_t>(b.smem);
  if (offset >= b.smem_capacity) {
    if (const AllocationRange* r = allocation_containing(*b.grid, a)) {
      return hex_address(a) + " (" + kind_name(r->kind) + " allocation of " + bytes_word(r->end - r->base) + " at " +
             hex_address(r->base) + ", +" + std::to_string(a - r->base) + ")";
    }
    if (const SymbolRange* s = find_symbol(a)) return hex_address(a) + " (`" + s->name + "` +" + std::to_string(a - s->base) + ")";
    return hex_address(a);
  }
  // Shared offsets as a GPU would number them: from the start of the block's shared memory.
  const size_t dynamic = b.grid->launch->dynamic_smem;
  std::string out = "shared offset " + hex_address(offset - b.dynamic_offset);
  if (offset >= b.dynamic_offset && offset < b.dynamic_offset + dynamic) {
    return out + " (dynamic shared memory of " + bytes_word(dynamic) + ", +" + std::to_string(offset - b.dynamic_offset) + ")";
  }
  if (const SharedVariable* v = variable_containing(b, offset)) {
    return out + " (" + variable_label(*v) + ", +" + std::to_string(offset - v->offset) + ")";
  }
  // In a redzone: name the nearest region on either side.
  std::string nearest;
  size_t best = SIZE_MAX;
  if (offset >= b.dynamic_offset + dynamic && offset - (b.dynamic_offset + dynamic) < best) {
    best = offset - (b.dynamic_offset + dynamic);
    nearest = (best == 0 ? std::string("just") : bytes_word(best)) + " past the end of dynamic shared memory (" +
              bytes_word(dynamic) + ")";
  }
  if (offset < b.dynamic_offset && b.dynamic_offset - offset < best) {
    best = b.dynamic_offset - offset;
    nearest = bytes_word(best) + " before the start of dynamic shared memory";
  }
  for (const SharedVariable& v : b.variables) {
    const size_t end = v.offset + v.site->size;
    if (offset >= end && offset - end < best) {
      best = offset - end;
      nearest = (best == 0 ? std::string("just") : bytes_word(best)) + " past the end of " + variable_label(v);
    } else if (offset < v.offset && v.offset - offset < best) {
      best = v.offset - offset;
      nearest = bytes_word(best) + " before the start of " + variable_label(v);
    }
  }
  return out + (nearest.empty() ? " (no variable there)" : " (" + nearest + ")");
}

void checks_begin_grid(GridRun& grid) {
  load_symbols_for_device(grid.device);
  if (!grid.hooks) return;
  if (grid.checks.streams) grid.op_log = detail::current_op_log();
  // The race check between blocks: a sync tick per block (grids of up to 2^24 blocks).
  if (grid.checks.race && grid.blocks > 1 && grid.blocks <= (uint64_t{1} << 24)) grid.block_synced.assign(grid.blocks, 0);
  race_check_begin_grid(grid);
  snapshot_allocations([&grid](const AllocationInfo& info) {
    const auto base = reinterpret_cast<uintptr_t>(info.base);
    grid.allocations.push_back(AllocationRange{base, base + info.size, info.device, info.kind, info.written});
  });
  std::sort(grid.allocations.begin(), grid.allocations.end(),
            [](const AllocationRange& x, const AllocationRange& y) { return x.base < y.base; });
}

void checks_end_grid(GridRun& grid) { race_check_end_grid(grid); }

// "file.cu:42" of a code address: addr2line on the object that holds it (kernels are compiled with
// line tables). Code inlined from a helper names its callers too: "tensor_core.cuh:179, called
// from flash.cu:93". Only ever run to word a fault.
std::string source_line(const void* pc) {
  if (pc == nullptr) return "";
  Dl_info info{};
  if (dladdr(pc, &info) == 0 || info.dli_fname == nullptr) return "";
  // A position-independent object is addressed from its load base; a fixed one absolutely.
  uintptr_t address = reinterpret_cast<uintptr_t>(pc) - 1;  // the call instruction, not the return
  const auto* header = static_cast<const Elf64_Ehdr*>(info.dli_fbase);
  if (header != nullptr && header->e_type == ET_DYN) address -= reinterpret_cast<uintptr_t>(info.dli_fbase);
  std::string path = info.dli_fname;
  if (path.empty() || path.find('\'') != std::string::npos) return "";
  if (path.find('/') == std::string::npos) path = "/proc/self/exe";
  char command[4200];
  std::snprintf(command, sizeof command, "addr2line -i -e '%s' 0x%llx 2>/dev/null", path.c_str(),
                static_cast<unsigned long long>(address));
  FILE* pipe = popen(command, "r");
  if (pipe == nullptr) return "";
  std::string text;
  char line[4096] = {};
  for (int frame = 0; frame < 3 && std::fgets(line, sizeof line, pipe) != nullptr; ++frame) {
    std::string place = line;  // innermost first, then the places it was inlined into
    while (!place.empty() && (place.back() == '\n' || place.back() == '\r')) place.pop_back();
    const size_t discriminator = place.find(" (discriminator");
    if (discriminator != std::string::npos) place.resize(discriminator);
    if (place.empty() || place[0] == '?') break;
    text += (text.empty() ? "" : ", called from ") + place;
  }
  pclose(pipe);
  return text;
}

}  // namespace blockscope::sim::exec
