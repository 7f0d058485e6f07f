// Token + position embedding as plain OpenMP loops (a gather and, backward, a
// scatter: memory-bound). The output and its gradient are f32 or bf16 (f32
// math, typed.h); the tables and their gradients are f32. At bf16 the table
// entries are read rounded to bf16, as the Linears read their weights: every
// matrix a bf16 model reads is a bf16 matrix, which lets ZeRO hold 2-byte
// copies of them (parallel/zero_replica.h) and compute exactly what data
// parallelism computes. Backward is
// deterministic: each thread owns a range of channels and visits the tokens
// in order, so repeated ids add in the same order on every run, with no atomics.
#include "ops/embedding.h"

#include <algorithm>
#include <cstring>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/typed.h"

namespace cohort::ops {

using cpu::check_operands;
using cpu::load;
using cpu::rounded;
using cpu::store;

namespace {

// Every id in [0, V) and T within the position table, before anything is
// read or written.
void check_ids(const char* op, const EmbeddingShape& s, const int32_t* ids) {
  COHORT_INPUT_CHECK(s.t <= s.max_t, op, ": sequence length ", s.t,
                     " exceeds the position table's ", s.max_t, " rows");
  COHORT_CHECK(ids != nullptr || s.b * s.t == 0, op, ": no token ids");
  for (int64_t i = 0; i < s.b * s.t; ++i)
    COHORT_INPUT_CHECK(ids[i] >= 0 && ids[i] < s.vocab, op, ": token id ", ids[i],
                       " at position (b ", i / s.t, ", t ", i % s.t,
                       ") is outside the vocabulary [0, ", s.vocab, ")");
}

}  // namespace

void embedding_forward(const EmbeddingShape& s, const int32_t* ids, ConstView wte_v,
                       ConstView wpe_v, View dst_v) {
  const char* op = "embedding forward";
  cpu::dispatch_float(op, s.dtype, [&](auto tag) {
    using T = decltype(tag);
    check_operands(op, s.dtype, {{"dst", dst_v}});
    check_operands(op, DType::kF32, {{"wte", wte_v}, {"wpe", wpe_v}});
    check_ids(op, s, ids);
    const float* wte = wte_v.as<float>();
    const float* wpe = wpe_v.as<float>();
    T* dst = dst_v.as<T>();
    const int64_t c = s.c;
#pragma omp parallel for if (s.b * s.t * c > 65536)
    for (int64_t i = 0; i < s.b * s.t; ++i) {
      const float* tok = wte + int64_t(ids[i]) * c;
      const float* pos = wpe + (i % s.t) * c;
      T* row = dst + i * c;
#pragma omp simd
      for (int64_t k = 0; k < c; ++k) store(row, k, rounded<T>(tok[k]) + rounded<T>(pos[k]));
    }
  });
}

void embedding_backward(const EmbeddingShape& s, const int32_t* ids, ConstView ddst_v,
                        View dwte_v, View dwpe_v, bool accumulate) {
  const char* op = "embedding backward";
  cpu::dispatch_float(op, s.dtype, [&](auto tag) {
    using T = decltype(tag);
    check_operands(op, s.dtype, {{"ddst", ddst_v}});
    check_operands(op, DType::kF32, {{"dwte", dwte_v}, {"dwpe", dwpe_v}});
    check_ids(op, s, ids);
    const T* ddst = ddst_v.as<T>();
    float* dwte = dwte_v.as<float>();
    float* dwpe = dwpe_v.as<float>();
    const int64_t c = s.c, rows = s.b * s.t;
    if (!accumulate) {
      // The whole token table: rows of tokens not seen get zero.
      const int64_t n = s.vocab * c;
#pragma omp parallel for if (n > 65536)
      for (int64_t i = 0; i < n; ++i) dwte[i] = 0.0f;
      std::memset(dwpe, 0, size_t(s.t * c) * sizeof(float));
    }
    // Channel ranges of 16 (one cache line of f32) per task: each thread
    // writes only its own columns of dwte and dwpe.
    constexpr int64_t kCols = 16;
#pragma omp parallel for if (rows * c > 65536)
    for (int64_t k0 = 0; k0 < c; k0 += kCols) {
      const int64_t k1 = std::min(c, k0 + kCols);
      for (int64_t i = 0; i < rows; ++i) {
        const T* g = ddst + i * c;
        float* tok = dwte + int64_t(ids[i]) * c;
        float* pos = dwpe + (i % s.t) * c;
#pragma omp simd
        for (int64_t k = k0; k < k1; ++k) {
          const float v = load(g, k);
          tok[k] += v;
          pos[k] += v;
        }
      }
    }
  });
}

}  // namespace cohort::ops
