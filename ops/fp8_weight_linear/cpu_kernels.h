// The CPU's FP8-weight dot products (the inner loops of fp8_weight_linear's skinny kernel), one
// version per instruction set so a test can run each on one machine:
//   avx512  16 codes per step: sign-extended to 16 bits, moved into f16's bit layout (a shift, a
//           compare and one ternary-logic op: AVX-512VL), widened by VCVTPH2PS (AVX-512F); 4
//           weight rows × up to 4 x rows of f32 sums in registers, or 2 × up to 8 for larger
//           batches (each code widened once per 8 rows);
//   avx2    8 codes per step the same way (AVX2, F16C, FMA; two ANDs and an OR for the select);
//           2 weight rows × up to 4 x rows;
//   scalar  a 256-entry table of the codes' values.
// Through f16: an e5m2 code is f16's top byte (its value exactly); an e4m3 code's exponent and
// mantissa moved up 7 bits read as an f16 2^8 times smaller (the exponent biases differ by 8,
// subnormals included), its NaN (S.1111.111) given f16's NaN exponent. Each sum is of products of
// x with those f16 values, then multiplied by 2^8 (exact): the codes' own values, exactly.
#pragma once

#include <cstdint>
#include <vector>

namespace blockscope::ops::cpu::fp8_weight {

enum class Isa { avx512, avx2, scalar };
const char* isa_name(Isa isa);
// The versions this CPU runs, the fastest first (scalar always last).
const std::vector<Isa>& isas_on_this_cpu();

// t[m · ldt + o] = Σ_j x[m · k + j] · value(w[o · k + j]) for m < rows and o0 ≤ o < o1, summed in
// f32: x [rows, k] f32 contiguous, w [*, k] FP8 codes (e5m2 or e4m3) contiguous.
void dot_rows(Isa isa, const float* x, int64_t rows, const uint8_t* w, int64_t k, int64_t o0, int64_t o1, bool e5m2,
              float* t, int64_t ldt);

// The same with x in bf16 (its bits, [rows, k] contiguous), by AVX512_BF16's VDPBF16PS: 32 codes
// per step widened as above, then packed into bf16 pairs (exact: every FP8 value is a bf16), each
// instruction two products per lane into the f32 sums -- twice the multiply-adds of an FMA, which
// is what a batch's rows need. Where the CPU has it (bf16_dot_on_this_cpu(); InternalError else).
bool bf16_dot_on_this_cpu();
void dot_rows_bf16(const uint16_t* x, int64_t rows, const uint8_t* w, int64_t k, int64_t o0, int64_t o1, bool e5m2,
                   float* t, int64_t ldt);

}  // namespace blockscope::ops::cpu::fp8_weight
