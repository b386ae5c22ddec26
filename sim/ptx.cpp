// mma.sync, ldmatrix and cp.async on the simulated GPU (sim/ptx.h): warp collectives whose
// combine step computes every lane's registers with the PTX ISA's fragment layouts
// (sim/ptx_model.h), and per-thread cp.async groups kept by the executor.
#include "sim/ptx.h"

#include <cstring>
#include <string>

#include "sim/executor_state.h"
#include "sim/ptx_model.h"

namespace blockscope::sim::ptx {
namespace {

namespace model = ptx_model;
using exec::SimThread;

SimThread& this_thread(const char* what) {
  SimThread* t = exec::current_sim_thread();
  if (t == nullptr) throw Fault(std::string(what) + " called outside a kernel running on the simulated GPU");
  return *t;
}

// A 16-byte shared-memory operand of `owner` at `p`: inside the block's shared memory and aligned.
// `lane` >= 0: the ldmatrix row address of that lane. `pc`: the instruction's place in the kernel.
void check_shared_16(SimThread& owner, const void* p, const char* what, bool write, const void* pc, int lane = -1) {
  exec::BlockRun& b = *owner.block;
  const uintptr_t offset = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(b.smem);
  // Composed only to throw (check_access below may abandon the thread: no string may be alive then).
  const auto operand = [&] { return lane < 0 ? std::string(what) : std::string(what) + " of lane " + std::to_string(lane); };
  if (p == nullptr || offset >= b.smem_capacity) {
    fault((operand() + ": address " + (p ? "is not in this block's shared memory" : "is null")).c_str());
  }
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    fault((operand() + ": shared-memory address " + exec::describe_address(b, p) + " is not 16-byte aligned").c_str());
  }
  exec::GridRun& g = *b.grid;
  if (g.hooks) exec::check_access(owner, p, 16, write, true, pc, false);
}

struct MmaIn {
  uint32_t a[4];
  uint32_t b[2];
  float c[4];
};

// Performs the oldest committed group of `t`.
void perform(SimThread& t, const std::vector<exec::PendingCopy>& group) {
  for (const exec::PendingCopy& copy : group) {
    check_shared_16(t, copy.dst, "cp.async destination", true, copy.pc);
    std::memcpy(copy.dst, copy.bytes, 16);
  }
}

}  // namespace

uint32_t shared_address(const void* smem_ptr) {
  SimThread* t = exec::current_sim_thread();
  if (t != nullptr) {
    const exec::BlockRun& b = *t->block;
    const uintptr_t offset = reinterpret_cast<uintptr_t>(smem_ptr) - reinterpret_cast<uintptr_t>(b.smem);
    if (offset < b.smem_capacity) return static_cast<uint32_t>(offset - b.dynamic_offset);
  }
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(smem_ptr));
}

void mma_m16n8k16(bool bf16, float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  MmaIn in;
  std::memcpy(in.a, a, sizeof in.a);
  std::memcpy(in.b, b, sizeof in.b);
  std::memcpy(in.c, c, sizeof in.c);
  float out[4];
  const char* what = bf16 ? "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
                          : "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
  warp_collective(
      what, 0xffffffffu, &in, sizeof in, out, sizeof out,
      [bf16](const WarpCollectiveArgs& args) {
        uint32_t A[model::kWarpSize][4], B[model::kWarpSize][2];
        float C[model::kWarpSize][4], D[model::kWarpSize][4];
        for (int lane = 0; lane < model::kWarpSize; ++lane) {
          MmaIn lane_in;
          std::memcpy(&lane_in, args.in[lane], sizeof lane_in);
          std::memcpy(A[lane], lane_in.a, sizeof lane_in.a);
          std::memcpy(B[lane], lane_in.b, sizeof lane_in.b);
          std::memcpy(C[lane], lane_in.c, sizeof lane_in.c);
        }
        model::mma_m16n8k16(A, B, C, D, bf16);
        exec::count_mma(*exec::current_grid(), bf16);
        for (int lane = 0; lane < model::kWarpSize; ++lane) std::memcpy(args.out[lane], D[lane], sizeof D[lane]);
      },
      true);
  std::memcpy(d, out, sizeof out);  // after the collective: d may alias c
}

void ldmatrix(int num, bool trans, uint32_t* r, const void* smem_row_ptr) {
  if (num != 1 && num != 2 && num != 4) fault("ldmatrix loads 1, 2 or 4 matrices");
  SimThread& me = this_thread("ldmatrix");
  const void* pc = __builtin_return_address(0);  // the same instruction in every lane (.sync.aligned)
  exec::BlockRun* block = me.block;
  const unsigned warp_base = me.state.warp * exec::kWarpSize;
  uint32_t out[4] = {0, 0, 0, 0};
  // A static name: a fault in the collective abandons the thread, whose frames are never unwound.
  static const char* const kNames[2][3] = {
      {"ldmatrix.sync.aligned.m8n8.x1.shared.b16", "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
       "ldmatrix.sync.aligned.m8n8.x4.shared.b16"},
      {"ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16", "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
       "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"}};
  warp_collective(
      kNames[trans][num == 4 ? 2 : num - 1], 0xffffffffu, &smem_row_ptr, sizeof smem_row_ptr, out, sizeof out,
      [num, trans, block, warp_base, pc](const WarpCollectiveArgs& args) {
        const void* rows[model::kWarpSize] = {};
        for (int t = 0; t < 8 * num; ++t) {  // only these lanes' addresses count
          std::memcpy(&rows[t], args.in[t], sizeof rows[t]);
          check_shared_16(block->threads[warp_base + static_cast<unsigned>(t)], rows[t], "ldmatrix row address",
                          false, pc, t);
        }
        exec::count_ldmatrix(*block->grid, num, rows);
        uint32_t regs[model::kWarpSize][4] = {};
        model::ldmatrix_m8n8_b16(rows, num, trans, regs);
        for (int lane = 0; lane < model::kWarpSize; ++lane) std::memcpy(args.out[lane], regs[lane], sizeof regs[lane]);
      },
      true);
  for (int m = 0; m < num; ++m) r[m] = out[m];
}

void cp_async(void* smem, const void* gmem, int src_bytes) {
  SimThread& me = this_thread("cp.async");
  if (src_bytes < 0 || src_bytes > 16) fault("cp.async: src-size outside 0..16");
  exec::BlockRun& b = *me.block;
  const uintptr_t offset = reinterpret_cast<uintptr_t>(smem) - reinterpret_cast<uintptr_t>(b.smem);
  if (smem == nullptr || offset >= b.smem_capacity) fault("cp.async: the destination is not in this block's shared memory");
  if (reinterpret_cast<uintptr_t>(smem) % 16 != 0) fault("cp.async: the shared destination is not 16-byte aligned");
  const void* pc = __builtin_return_address(0);
  exec::PendingCopy copy{smem, {}, pc};
  if (src_bytes > 0) {
    if (gmem == nullptr) fault("cp.async: null global source");
    if (reinterpret_cast<uintptr_t>(gmem) % 16 != 0) fault("cp.async: global source not 16-byte aligned");
    if (reinterpret_cast<uintptr_t>(gmem) - reinterpret_cast<uintptr_t>(b.smem) < b.smem_capacity) {
      fault("cp.async: the source is in shared memory, not global memory");
    }
    exec::GridRun& g = *b.grid;
    if (g.hooks) exec::check_access(me, gmem, static_cast<size_t>(src_bytes), false, false, pc, false);
    std::memcpy(copy.bytes, gmem, static_cast<size_t>(src_bytes));
  }
  // One instruction: its global side (src_bytes of the source) and its shared side (16 bytes).
  exec::count_access(me, gmem, static_cast<size_t>(src_bytes), exec::Access::async_copy_source, pc);
  exec::count_access(me, smem, 16, exec::Access::async_copy_destination, pc);
  // A GPU may land the copy before the wait: other threads must be done with the destination now.
  exec::check_async_write(me, smem, copy.bytes, 16, pc);
  me.open_copies.push_back(copy);
}

void cp_async_commit() {
  SimThread& me = this_thread("cp.async.commit_group");
  me.copy_groups.push_back(std::move(me.open_copies));
  me.open_copies.clear();
}

void cp_async_wait(int pending) {
  SimThread& me = this_thread("cp.async.wait_group");
  while (static_cast<int>(me.copy_groups.size()) > pending) {
    perform(me, me.copy_groups.front());
    me.copy_groups.pop_front();
  }
}

void cp_async_wait_all() {
  this_thread("cp.async.wait_all");
  cp_async_commit();
  cp_async_wait(0);
}

uint32_t pack_bf16x2(float lo, float hi) {
  return model::pack_b16x2(model::float_to_bf16_bits_rn(lo), model::float_to_bf16_bits_rn(hi));
}
uint32_t pack_f16x2(float lo, float hi) {
  return model::pack_b16x2(model::float_to_f16_bits_rn(lo), model::float_to_f16_bits_rn(hi));
}

}  // namespace blockscope::sim::ptx
