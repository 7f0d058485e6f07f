#include "parallel/zero_layers.h"

#include <algorithm>
#include <memory>

#include "core/clock.h"
#include "core/memory.h"
#include "core/timeline.h"
#include "parallel/defaults.h"

namespace cohort {

namespace {

// The parts of [b, e) outside every range of `keep`.
nn::Ranges subtract(int64_t b, int64_t e, const nn::Ranges& keep) {
  nn::Ranges out = {{b, e}};
  for (auto [kb, ke] : keep) {
    nn::Ranges next;
    for (auto [lo, hi] : out) {
      if (ke <= lo || kb >= hi) {
        next.push_back({lo, hi});
        continue;
      }
      if (lo < kb) next.push_back({lo, kb});
      if (ke < hi) next.push_back({ke, hi});
    }
    out = next;
  }
  return out;
}

}  // namespace

std::vector<const nn::Module*> zero_units(const nn::Module& m, bool tied, int64_t bucket) {
  std::vector<const nn::Module*> leaves;
  m.collect_leaves(leaves);
  if (tied || m.num_params() <= bucket || leaves.size() < 2) return {&m};
  return leaves;
}

ZeroLayers::ZeroLayers(comm::Communicator& comm, nn::Model& model, const ShardLayout& layout,
                       int stage, double bucket_mb, double prefetch_mb, bool stream_rows,
                       const Bf16Replica* replica, Bf16GradShard* low_grads)
    : comm_(comm),
      model_(model),
      layout_(layout),
      replica_(replica),
      low_grads_(low_grads),
      gather_(stage == 3 || replica),
      last_only_(stage == 1),
      bucket_(f32_elements_in_mib(bucket_mb)),
      prefetch_(f32_elements_in_mib(prefetch_mb)),
      scratch_(size_t(kShardSegment)) {
  const Arena& a = model.params();
  if (stream_rows && a.ties().size() == 1) {  // GPT-2's wte, read by the embedding and the head
    const ParamInfo& owner = a.infos()[a.ties()[0].owner];
    if (owner.offset >= layout.first()) slot_b_ = owner.offset, slot_e_ = owner.offset + owner.numel();
  }
  for (size_t i = 0; i < model.layers().size(); ++i) add_layer(i);
  ticket_.assign(units_.size(), 0);
}

// Layer i's units: itself, or, split, each of its leaves.
void ZeroLayers::add_layer(size_t i) {
  const nn::Module& m = model_.layers().child(i);
  const nn::Ranges reads = model_.layer_ranges(i);  // its own range, and a tie's slot
  const std::vector<const nn::Module*> leaves = zero_units(m, reads.size() > 1, bucket_);
  const bool split = leaves[0] != &m;
  layer_unit_.push_back(units_.size());
  split_.push_back(split);
  const nn::Ranges slot = {{slot_b_, slot_e_}};
  for (const nn::Module* leaf : leaves) {
    Unit u;
    for (auto [b, e] : split ? nn::Ranges{{leaf->param_begin(), leaf->param_end()}} : reads)
      for (auto part : subtract(b, e, slot)) u.ranges.push_back(part);
    // --freeze: a frozen prefix has no gradient to reduce (layout_.first()).
    const int64_t b = std::max(leaf->param_begin(), layout_.first());
    if (b < leaf->param_end()) u.grads = subtract(b, leaf->param_end(), slot);  // the matrix: ids_done
    for (auto [gb, ge] : u.grads) max_part_ = std::max(max_part_, ge - gb);
    if (leaf->param_begin() <= slot_b_ && slot_b_ < leaf->param_end()) slot_unit_ = units_.size();
    if (split) leaf_unit_[leaf] = units_.size();
    units_.push_back(std::move(u));
  }
}

int64_t ZeroLayers::size(size_t u) const {
  int64_t n = 0;
  for (auto [b, e] : units_[u].ranges) n += e - b;
  return n;
}

int64_t ZeroLayers::held() const {
  int64_t n = 0;
  for (size_t u = 0; u < units_.size(); ++u)
    if (ticket_[u]) n += size(u);
  return n;
}

nn::Ranges ZeroLayers::held_ranges(size_t except) const {
  nn::Ranges r;
  for (size_t u = 0; u < units_.size(); ++u)
    if (u != except && ticket_[u])
      r.insert(r.end(), units_[u].ranges.begin(), units_[u].ranges.end());
  return r;
}

// The units after u in the pass's order (step +1 forward, -1 backward) are
// queued until their parameters reach the prefetch budget: always the next
// one, and more while the ones queued ahead are small. One unit ahead,
// cifar-resnet50's batch-norm leaves (a few KB, tens of microseconds of
// compute) left each gather's wake-up on the critical path: on 2 ranks of 2
// vCPUs the compute thread waited 100-260 ms a step, 7-89 with 16 MB ahead.
void ZeroLayers::prefetch(size_t u, int step) {
  if (replica_) return;  // widening happens when the unit runs: nothing to queue
  int64_t ahead = 0;
  for (size_t j = u + size_t(step); j < units_.size() && ahead < prefetch_; j += size_t(step)) {
    fetch(j);
    ahead += size(j);
  }
}

CommQueue::Ticket ZeroLayers::materialize(int64_t b, int64_t e) {
  float* w = model_.params().params().f32();
  if (replica_) {
    timeline::Span span("zero", "widen bf16 copy");
    replica_->expand(w, b, e);
    return 0;
  }
  return queue_.push([this, w, b, e] {
    timeline::Span span("zero", "gather", nullptr, -1, (e - b) * int64_t(sizeof(float)));
    gather_range(comm_, layout_, w, b, e);
  });
}

// A unit's ticket is that of its last range (the queue runs in order); a
// widened unit, or one without parameters, holds kReady.
void ZeroLayers::fetch(size_t u) {
  if (!gather_ || ticket_[u]) return;
  CommQueue::Ticket t = kReady;
  for (auto [b, e] : units_[u].ranges)
    if (CommQueue::Ticket got = materialize(b, e)) t = got;
  ticket_[u] = t;
  peak_gathered_ = std::max(peak_gathered_, held());
}

void ZeroLayers::wait_for(size_t u) {
  if (!gather_ || ticket_[u] == kReady) return;
  Timer t;
  timeline::Span span("zero", "wait for gather", "unit", int64_t(u));
  queue_.wait(ticket_[u]);
  wait_s_ += t.seconds();
}

void ZeroLayers::drop(size_t u, const nn::Ranges& keep) {
  if (!gather_ || !ticket_[u]) return;
  float* w = model_.params().params().f32();
  for (auto [b, e] : units_[u].ranges)
    for (auto [lo, hi] : subtract(b, e, keep)) release_unowned(layout_, comm_.rank(), w, lo, hi, false);
  ticket_[u] = 0;
}

void ZeroLayers::before_forward(size_t i) {
  if (!split_[i]) unit_before_forward(layer_unit_[i]);
}
void ZeroLayers::after_forward(size_t i) {
  if (!split_[i]) unit_after_forward(layer_unit_[i]);
}
void ZeroLayers::before_backward(size_t i) {
  if (!split_[i]) unit_before_backward(layer_unit_[i]);
}
void ZeroLayers::after_backward(size_t i) {
  if (!split_[i]) unit_after_backward(layer_unit_[i]);
}

// A split layer's children that are containers or hold no parameters are
// not units: their leaves' calls come on their own.
void ZeroLayers::before_forward(const nn::Module& m) {
  if (auto it = leaf_unit_.find(&m); it != leaf_unit_.end()) unit_before_forward(it->second);
}
void ZeroLayers::after_forward(const nn::Module& m) {
  if (auto it = leaf_unit_.find(&m); it != leaf_unit_.end()) unit_after_forward(it->second);
}
void ZeroLayers::before_backward(const nn::Module& m) {
  if (auto it = leaf_unit_.find(&m); it != leaf_unit_.end()) unit_before_backward(it->second);
}
void ZeroLayers::after_backward(const nn::Module& m) {
  if (auto it = leaf_unit_.find(&m); it != leaf_unit_.end()) unit_after_backward(it->second);
}

void ZeroLayers::unit_before_forward(size_t u) {
  // A forward without backward (evaluation) left its last unit held.
  if (u == 0)
    for (size_t j = 2; j < units_.size(); ++j) drop(j, units_[0].ranges);
  fetch(u);
  prefetch(u, +1);
  wait_for(u);
}

void ZeroLayers::unit_after_forward(size_t u) {
  if (u + 1 < units_.size()) drop(u, held_ranges(u));  // the last stays for backward
}

void ZeroLayers::unit_before_backward(size_t u) {
  // The embedding adds its rows into the matrix's gradient, which the head's
  // reduce-scatters may still be reading.
  if (u == slot_unit_ && row_stream() && armed_) wait_reductions();
  fetch(u);
  prefetch(u, -1);
  wait_for(u);
}

void ZeroLayers::unit_after_backward(size_t u) {
  drop(u, held_ranges(u));
  if (!armed_) return;
  const nn::Ranges& parts = units_[u].grads;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) add_grads(it->first, it->second);
}

// Backward finishes layers last to first, so a bucket grows downwards.
void ZeroLayers::add_grads(int64_t b, int64_t e) {
  if (hi_ > lo_ && e != lo_) flush();
  if (hi_ == lo_) {
    hi_ = e;
    if (low_grads_) start_stage(e - b);
  }
  lo_ = b;
  if (low_grads_) stage(b, e);
  if (hi_ - lo_ >= bucket_) flush();
}

// bf16 on the wire: the bucket is assembled at 2 bytes as backward fills
// it, each part's f32 pages (the shard's too: its sum goes to low_grads_)
// returned at once. (Held at f32 until the bucket was full, the filling
// bucket was 25 MB of gpt2's peak.) It grows downwards from its end.
// Each bucket's buffer is a mapping of its own, returned when its reduction
// ends. (Buffers kept in a pool for the next buckets spared the page
// faults, about 5% of a gpt2 step on 2 ranks, but stayed resident: stage 3
// on 4 ranks peaked 27 MB higher, 1.12 of DeepSpeed's model against 1.07.)
// On huge pages, as the buffer is written whole: at 4 KB pages (under
// kHugePagesFrom) cifar-resnet50's zero-1 x2 took 11.5k faults per rank
// and step, about 0.23 s of CPU; at 2 MB, 27 times fewer bytes' worth.
void ZeroLayers::start_stage(int64_t first) {
  const int64_t need = bucket_ + std::max(first, max_part_);
  stage_ = {allocate_pages(size_t(need) * sizeof(BF16), PageSize::kHuge), need};
}

void ZeroLayers::stage(int64_t b, int64_t e) {
  float* g = model_.params().grads().f32();
  BF16* at = static_cast<BF16*>(stage_.pages.get()) + (stage_.cap - (hi_ - b));
  f32_to_bf16(g + b, at, size_t(e - b));
  release_pages(g + b, size_t(e - b) * 4, true);
  peak_buckets_ = std::max(peak_buckets_, in_flight_ += (e - b) * 2);
}

void ZeroLayers::flush() {
  if (hi_ == lo_) return;
  const int64_t b = lo_, e = hi_;
  lo_ = hi_ = 0;
  float* g = model_.params().grads().f32();
  if (low_grads_)
    reducing_.push_back({queue_reduce_low(b, e)});
  else
    reducing_.push_back({queue_reduce(g, b, e), b, e});
  return_reduced(false);
  // At most kInFlight buckets wait to be reduced: where communication is
  // slower than backward (4 ranks on 2 cores) the queue would otherwise hold
  // nearly every layer's gradients by the end of backward (measured: gpt2
  // zero-2 on 4 ranks peaked as high as zero-1).
  constexpr size_t kInFlight = 2;
  while (reducing_.size() > kInFlight) {
    Timer t;
    queue_.wait(reducing_.front().ticket);
    wait_s_ += t.seconds();
    return_reduced(false);
  }
}

// On the compute thread, between its layers: returned by the queue thread
// while this one ran backward (stages 1-2's f32 buckets until 2026-11-27),
// gpt2's zero-1 step on 2 ranks of 2 vCPUs took 1386-1456 ms (median 1391)
// against 1216-1276 with the pages kept; returned here, 1241-1379 (median
// 1278; dp 1227-1300) at the same peak (1544 MB). All at once after
// backward: 1232-1254, but the peak then holds every gradient (1690 MB).
void ZeroLayers::return_reduced(bool wait) {
  float* g = model_.params().grads().f32();
  while (!reducing_.empty() && (wait || queue_.finished(reducing_.front().ticket))) {
    const Reduction r = reducing_.front();
    queue_.wait(r.ticket);  // rethrows a failed reduction's error
    reducing_.pop_front();
    if (r.e == r.b) continue;
    release_unowned(layout_, comm_.rank(), g, r.b, r.e, true);
    in_flight_ -= (r.e - r.b) * 4;
  }
}

CommQueue::Ticket ZeroLayers::queue_reduce(float* g, int64_t b, int64_t e) {
  peak_buckets_ = std::max(peak_buckets_, in_flight_ += (e - b) * 4);
  return queue_.push([this, g, b, e] {
    timeline::Span span("zero", "reduce-scatter", nullptr, -1, (e - b) * int64_t(sizeof(float)));
    // Every stage reduce-scatters over the shard blocks, so each sum runs in
    // dp's one-ring order on any rank count (stage 1's former ring of the
    // bucket alone cut it elsewhere: on 3 ranks cifar-resnet50's batch-norm
    // biases then ended 3% from dp's). Stage 1 keeps only its shard too:
    // gathering the rest back, as an all-reduce would, moved 1.5x dp's
    // bytes a step with the parameters' all-gather (gpt2 across 2 hosts at
    // 1 Gbit/s: 10.7 s a step against dp's 6.8).
    reduce_scatter_range(comm_, layout_, g, b, e, scratch_.data());
  });
}

CommQueue::Ticket ZeroLayers::queue_reduce_low(int64_t b, int64_t e) {
  StageBuffer buf = std::move(stage_);
  stage_ = {};
  BF16* low = static_cast<BF16*>(buf.pages.get()) + (buf.cap - (e - b));
  return queue_.push([this, buf, low, b, e]() mutable {
    timeline::Span span("zero", "reduce-scatter bf16", nullptr, -1, (e - b) * 2);
    reduce_scatter_range_bf16(comm_, layout_, low, b, e, reinterpret_cast<BF16*>(scratch_.data()));
    low_grads_->add(low, b, e);
    buf.pages.reset();  // the pages go back to the kernel now
    in_flight_ -= (e - b) * 2;
  });
}

void ZeroLayers::finish_backward() {
  flush();
  wait_reductions();
  // Backward prefetches unit u-1 after u, which is not always the unit it
  // runs next (a bottleneck's shortcut runs after its branch): such a unit
  // may still be held. Nothing held may outlive the step that changes it.
  for (size_t u = 0; u < units_.size(); ++u) drop(u, {});
}

void ZeroLayers::wait_reductions() {
  Timer t;
  queue_.drain();
  wait_s_ += t.seconds();
  return_reduced(true);
}

void ZeroLayers::gather_all(int root) {
  if (!gather_) return;
  float* w = model_.params().params().f32();
  queue_.wait(queue_.push([&] { gather_range(comm_, layout_, w, 0, layout_.elements(), root); }));
}

void ZeroLayers::release_all() {
  if (!gather_) return;
  float* w = model_.params().params().f32();
  release_unowned(layout_, comm_.rank(), w, 0, layout_.elements(), false);
  std::fill(ticket_.begin(), ticket_.end(), 0);
}

}  // namespace cohort
