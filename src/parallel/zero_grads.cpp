#include "parallel/zero_grads.h"

#include <algorithm>
#include <tuple>

namespace cohort {

Bf16GradShard::Bf16GradShard(const ShardLayout& layout, int rank) {
  std::tie(sb_, se_) = layout.shard(rank);
  low_.assign(size_t(se_ - sb_), BF16{0});
}

namespace {

inline float widen(BF16 x) { return from_bf16(x); }
inline float widen(float x) { return x; }

template <typename T>
void add_part(std::vector<BF16>& low, int64_t sb, int64_t se, const T* v, int64_t b, int64_t e) {
  const int64_t lo = std::max(b, sb), hi = std::min(e, se);
  BF16* __restrict d = low.data() + (lo - sb);
  const T* __restrict x = v + (lo - b);
#pragma omp simd
  for (int64_t i = 0; i < hi - lo; ++i) d[i] = to_bf16(from_bf16(d[i]) + widen(x[i]));
}

}  // namespace

void Bf16GradShard::add(const BF16* v, int64_t b, int64_t e) { add_part(low_, sb_, se_, v, b, e); }
void Bf16GradShard::add(const float* v, int64_t b, int64_t e) { add_part(low_, sb_, se_, v, b, e); }

void Bf16GradShard::widen(int64_t offset, int64_t n, float* out) const {
  bf16_to_f32(low_.data() + offset, out, size_t(n));
}

void Bf16GradShard::clear() { std::fill(low_.begin(), low_.end(), BF16{0}); }

}  // namespace cohort
