#include "parallel/zero_replica.h"

#include <algorithm>

#include "core/memory.h"
#include "core/timeline.h"

namespace cohort {

bool zero_holds_bf16_copy(int stage, DType compute, int ranks) {
  return compute == DType::kBF16 && ranks > 2 && stage <= 2;
}

Bf16Replica::Bf16Replica(const Arena& a, const ShardLayout& layout, int rank)
    : layout_(layout), rank_(rank) {
  std::vector<std::pair<int64_t, int64_t>> vecs;
  for (const ParamInfo& p : a.infos()) {
    const int64_t b = std::max(p.offset, layout.first()), e = p.offset + p.numel();
    if (p.shape.size() < 2 && b < e) vecs.push_back({b, e});
  }
  std::sort(vecs.begin(), vecs.end());
  int64_t at = 0;
  for (auto [b, e] : vecs) {
    vec_b_.push_back(b);
    vec_e_.push_back(e);
    vec_at_.push_back(at);
    at += e - b;
  }
  vec_.assign(size_t(at), 0.0f);
}

int64_t Bf16Replica::bytes() const {
  const auto [sb, se] = layout_.shard(rank_);
  return (layout_.elements() - (se - sb)) * int64_t(sizeof(BF16)) +
         int64_t(vec_.size() * sizeof(float));
}

void Bf16Replica::build(const float* w) {
  pages_ = allocate_pages(size_t(layout_.elements()) * sizeof(BF16));
  low_ = static_cast<BF16*>(pages_.get());
  const auto [sb, se] = layout_.shard(rank_);
  f32_to_bf16(w, low_, size_t(sb));
  f32_to_bf16(w + se, low_ + se, size_t(layout_.elements() - se));
  for (size_t i = 0; i < vec_b_.size(); ++i)
    std::copy(w + vec_b_[i], w + vec_e_[i], vec_.begin() + vec_at_[i]);
}

void Bf16Replica::widen(float* w, int64_t b, int64_t e) const {
  // The first vector ending after b, then alternately matrix and vector parts.
  size_t i = size_t(std::upper_bound(vec_e_.begin(), vec_e_.end(), b) - vec_e_.begin());
  while (b < e) {
    const int64_t vb = i < vec_b_.size() ? std::max(vec_b_[i], b) : e;
    const int64_t mat_end = std::min(vb, e);
    if (b < mat_end) bf16_to_f32(low_ + b, w + b, size_t(mat_end - b));
    if (mat_end >= e) return;
    const int64_t ve = std::min(vec_e_[i], e);
    std::copy(vec_.begin() + vec_at_[i] + (vb - vec_b_[i]), vec_.begin() + vec_at_[i] + (ve - vec_b_[i]),
              w + vb);
    b = ve;
    ++i;
  }
}

void Bf16Replica::expand(float* w, int64_t b, int64_t e) const {
  b = std::max(b, layout_.first());
  const auto [sb, se] = layout_.shard(rank_);
  widen(w, b, std::min(e, sb));
  widen(w, std::max(b, se), e);
}

void Bf16Replica::refresh(comm::Communicator& c, const float* w) {
  timeline::Span span("zero", "allgather bf16 copy");
  const auto [sb, se] = layout_.shard(rank_);
  allgather_bf16_shards(c, layout_, low_, w);
  std::fill(vec_.begin(), vec_.end(), 0.0f);
  for (size_t i = 0; i < vec_b_.size(); ++i)
    for (int64_t k = std::max(vec_b_[i], sb), end = std::min(vec_e_[i], se); k < end; ++k)
      vec_[size_t(vec_at_[i] + k - vec_b_[i])] = w[k];
  if (!vec_.empty()) c.allreduce(vec_.data(), int64_t(vec_.size()), comm::ReduceOp::kSum);
}

}  // namespace cohort
