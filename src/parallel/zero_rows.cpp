// ZeroLayers as an nn::RowStream (zero_layers.h): the vocabulary matrix in
// row blocks for the tied head, and at the ranks' token rows for the
// embedding. Every collective runs on the queue thread, in call order.
#include <algorithm>

#include "core/clock.h"
#include "core/memory.h"
#include "core/timeline.h"
#include "parallel/zero_layers.h"

namespace cohort {

bool ZeroLayers::streams(const float* weight) const {
  return slot_e_ > slot_b_ && weight == model_.params().params().f32() + slot_b_;
}

void ZeroLayers::acquire(int64_t cols, int64_t r0, int64_t r1, int64_t n0, int64_t n1) {
  if (!gather_) return;
  const auto queue_block = [&](int64_t a, int64_t b) {
    const int64_t lo = slot_b_ + a * cols, hi = slot_b_ + b * cols;
    if (hi <= lo || blocks_.count(lo)) return;
    blocks_[lo] = materialize(lo, hi);
    block_held_ += hi - lo;
    peak_gathered_ = std::max(peak_gathered_, held() + block_held_);
  };
  queue_block(r0, r1);
  if (replica_) return;  // widened now: nothing to prefetch
  queue_block(n0, n1);
  Timer t;
  timeline::Span span("zero", "wait for rows");
  queue_.wait(blocks_[slot_b_ + r0 * cols]);
  wait_s_ += t.seconds();
}

void ZeroLayers::release(int64_t cols, int64_t r0, int64_t r1) {
  if (!gather_) return;
  const int64_t lo = slot_b_ + r0 * cols, hi = slot_b_ + r1 * cols;
  release_unowned(layout_, comm_.rank(), model_.params().params().f32(), lo, hi, false);
  blocks_.erase(lo);
  block_held_ -= hi - lo;
}

// As a bucket of its own, after the one filling (empty while the head runs).
void ZeroLayers::rows_done(int64_t cols, int64_t r0, int64_t r1) {
  if (!armed_) return;
  flush();
  add_grads(slot_b_ + r0 * cols, slot_b_ + r1 * cols);
  flush();
}

nn::Ranges ZeroLayers::id_runs(const std::vector<int32_t>& ids, int64_t cols) {
  const int n = comm_.size();
  int32_t count = int32_t(ids.size());
  std::vector<int32_t> counts(size_t(n), 0);
  comm_.allgather(&count, counts.data(), 1);
  const int32_t most = *std::max_element(counts.begin(), counts.end());
  std::vector<int32_t> mine(size_t(most), -1), all(size_t(n) * size_t(most), -1);
  std::copy(ids.begin(), ids.end(), mine.begin());
  if (most > 0) comm_.allgather(mine.data(), all.data(), most);
  return local_runs(all, cols);
}

nn::Ranges ZeroLayers::local_runs(std::vector<int32_t> all, int64_t cols) const {
  // An id outside the matrix is left to the embedding's own check.
  const int64_t rows = (slot_e_ - slot_b_) / cols;
  all.erase(std::remove_if(all.begin(), all.end(), [&](int32_t id) { return id < 0 || id >= rows; }),
            all.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  nn::Ranges runs;
  for (int32_t id : all) {
    const int64_t b = slot_b_ + id * cols;
    if (!runs.empty() && runs.back().second == b)
      runs.back().second = b + cols;
    else
      runs.push_back({b, b + cols});
  }
  return runs;
}

void ZeroLayers::acquire_ids(int64_t cols, const int32_t* ids, int64_t n) {
  if (!gather_) return;
  float* w = model_.params().params().f32();
  std::vector<int32_t> mine(ids, ids + n);
  if (replica_) {  // this rank's rows, widened here: no rank waits for another
    id_held_ = local_runs(mine, cols);
    for (auto [b, e] : id_held_) replica_->expand(w, b, e);
    return note_id_rows();
  }
  Timer t;
  queue_.wait(queue_.push([this, w, cols, mine] {
    timeline::Span span("zero", "gather token rows");
    id_held_ = id_runs(mine, cols);
    gather_ranges(comm_, layout_, w, id_held_);
  }));
  wait_s_ += t.seconds();
  note_id_rows();
}

void ZeroLayers::note_id_rows() {
  int64_t rows = 0;
  for (auto [b, e] : id_held_) rows += e - b;
  peak_gathered_ = std::max(peak_gathered_, held() + block_held_ + rows);
}

void ZeroLayers::release_ids() {
  if (!gather_) return;
  float* w = model_.params().params().f32();
  for (auto [b, e] : id_held_) release_unowned(layout_, comm_.rank(), w, b, e, false);
  id_held_.clear();
}

// The token rows' gradients, summed over ranks in one all-reduce of just
// those rows: each rank keeps the elements of its shard (where the head's
// reduced gradient already is) and returns the rest.
void ZeroLayers::ids_done(int64_t cols, const int32_t* ids, int64_t n) {
  if (!armed_) return;
  float* g = model_.params().grads().f32();
  std::vector<int32_t> mine(ids, ids + n);
  reducing_.push_back({queue_.push([this, g, cols, mine] {
    timeline::Span span("zero", "all-reduce token rows");
    const nn::Ranges runs = id_runs(mine, cols);
    std::vector<float> packed;
    for (auto [b, e] : runs) packed.insert(packed.end(), g + b, g + e);
    if (!packed.empty()) comm_.allreduce(packed.data(), int64_t(packed.size()), comm::ReduceOp::kSum);
    const auto [sb, se] = layout_.shard(comm_.rank());
    const float* p = packed.data();
    for (auto [b, e] : runs) {
      if (low_grads_) {  // the head's part is there already: add, and zero the f32 rows
        low_grads_->add(p, b, e);
        release_pages(g + b, size_t(e - b) * 4, true);
      } else {
        for (int64_t i = std::max(b, sb), end = std::min(e, se); i < end; ++i) g[i] = p[i - b];
        release_unowned(layout_, comm_.rank(), g, b, e, true);
      }
      p += e - b;
    }
  })});
}

}  // namespace cohort
