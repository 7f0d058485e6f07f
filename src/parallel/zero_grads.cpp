#include "parallel/zero_grads.h"

#include <algorithm>
#include <cstring>
#include <tuple>

namespace cohort {

Bf16GradShard::Bf16GradShard(const ShardLayout& layout, int rank) {
  std::tie(sb_, se_) = layout.shard(rank);
  low_.assign(size_t(se_ - sb_), BF16{0});
}

namespace {

inline float widen(BF16 x) { return from_bf16(x); }
inline float widen(float x) { return x; }

// d = v, as adding v to a zero: 0 + -0 is +0.
template <typename T>
void put_into(BF16* __restrict d, const T* __restrict x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) d[i] = to_bf16(widen(x[i]) + 0.0f);
}

template <typename T>
void add_into(BF16* __restrict d, const T* __restrict x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) d[i] = to_bf16(from_bf16(d[i]) + widen(x[i]));
}

}  // namespace

// [lo, hi) in shard offsets: the parts already written this step are added
// to, the rest written; then the range joins the written ones.
template <typename T>
void Bf16GradShard::add_part(const T* v, int64_t b, int64_t e) {
  const int64_t lo = std::max(b, sb_) - sb_;
  const int64_t hi = std::min(e, se_) - sb_;
  if (hi <= lo) return;
  const T* x = v + (lo + sb_ - b);
  BF16* d = low_.data();
  for (int64_t at = lo; at < hi;) {
    auto it = std::upper_bound(written_.begin(), written_.end(), std::pair{at, INT64_MAX});
    if (it != written_.begin() && std::prev(it)->second > at) {  // inside a written range
      const int64_t to = std::min(hi, std::prev(it)->second);
      add_into(d + at, x + (at - lo), to - at);
      at = to;
    } else {
      const int64_t to = it == written_.end() ? hi : std::min(hi, it->first);
      put_into(d + at, x + (at - lo), to - at);
      at = to;
    }
  }
  mark_written(lo, hi);
}

void Bf16GradShard::mark_written(int64_t lo, int64_t hi) {
  auto it = std::lower_bound(written_.begin(), written_.end(), std::pair{lo, int64_t(0)});
  if (it != written_.begin() && std::prev(it)->second >= lo) --it;
  auto last = it;
  while (last != written_.end() && last->first <= hi) {
    lo = std::min(lo, last->first);
    hi = std::max(hi, last->second);
    ++last;
  }
  it = written_.erase(it, last);
  written_.insert(it, {lo, hi});
}

void Bf16GradShard::add(const BF16* v, int64_t b, int64_t e) { add_part(v, b, e); }
void Bf16GradShard::add(const float* v, int64_t b, int64_t e) { add_part(v, b, e); }

void Bf16GradShard::widen(int64_t offset, int64_t n, float* out) const {
  const int64_t end = offset + n;
  int64_t at = offset;
  for (auto [lo, hi] : written_) {
    if (hi <= at) continue;
    if (lo >= end) break;
    if (lo > at) std::memset(out + (at - offset), 0, size_t(lo - at) * sizeof(float));
    at = std::max(at, lo);
    const int64_t to = std::min(end, hi);
    bf16_to_f32(low_.data() + at, out + (at - offset), size_t(to - at));
    at = to;
  }
  if (end > at) std::memset(out + (at - offset), 0, size_t(end - at) * sizeof(float));
}

void Bf16GradShard::clear() { written_.clear(); }

}  // namespace cohort
