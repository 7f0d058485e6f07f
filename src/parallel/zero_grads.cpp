#include "parallel/zero_grads.h"

#include <algorithm>
#include <tuple>
#include <type_traits>

namespace cohort {

Bf16GradShard::Bf16GradShard(const ShardLayout& layout, int rank) {
  std::tie(sb_, se_) = layout.shard(rank);
  low_.assign(size_t(se_ - sb_), BF16{0});
}

namespace {

template <typename T>
void add_part(std::vector<BF16>& low, int64_t sb, int64_t se, const T* v, int64_t b, int64_t e) {
  const int64_t lo = std::max(b, sb), hi = std::min(e, se);
  for (int64_t i = lo; i < hi; ++i) {
    BF16& d = low[size_t(i - sb)];
    float x;
    if constexpr (std::is_same_v<T, BF16>)
      x = from_bf16(v[i - b]);
    else
      x = v[i - b];
    d = to_bf16(from_bf16(d) + x);
  }
}

}  // namespace

void Bf16GradShard::add(const BF16* v, int64_t b, int64_t e) { add_part(low_, sb_, se_, v, b, e); }
void Bf16GradShard::add(const float* v, int64_t b, int64_t e) { add_part(low_, sb_, se_, v, b, e); }

void Bf16GradShard::widen(int64_t offset, int64_t n, float* out) const {
  bf16_to_f32(low_.data() + offset, out, size_t(n));
}

void Bf16GradShard::clear() { std::fill(low_.begin(), low_.end(), BF16{0}); }

}  // namespace cohort
