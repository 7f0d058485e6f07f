#include "parallel/zero_layers.h"

#include <algorithm>

#include "core/clock.h"
#include "core/timeline.h"

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

ZeroLayers::ZeroLayers(comm::Communicator& comm, nn::Model& model, const ShardLayout& layout,
                       int stage, double bucket_mb, bool stream_rows)
    : comm_(comm),
      model_(model),
      layout_(layout),
      gather_(stage == 3),
      allreduce_(stage == 1),
      bucket_(std::max<int64_t>(1, int64_t(bucket_mb * (1 << 20) / sizeof(float)))),
      scratch_(size_t(kShardSegment)) {
  const Arena& a = model.params();
  if (stream_rows && a.ties().size() == 1) {  // GPT-2's wte, read by the embedding and the head
    const ParamInfo& owner = a.infos()[a.ties()[0].owner];
    if (owner.offset >= layout.first()) slot_b_ = owner.offset, slot_e_ = owner.offset + owner.numel();
  }
  const size_t n = model.layers().size();
  for (size_t i = 0; i < n; ++i) {
    nn::Ranges r;
    for (auto [b, e] : model.layer_ranges(i))
      for (auto part : subtract(b, e, {{slot_b_, slot_e_}})) r.push_back(part);
    ranges_.push_back(r);
    const nn::Module& m = model.layers().child(i);
    if (m.param_begin() <= slot_b_ && slot_b_ < m.param_end()) slot_layer_ = i;
  }
  ticket_.assign(n, 0);
}

void ZeroLayers::shard_params() {
  float* w = model_.params().params().f32();
  release_unowned(layout_, comm_.rank(), w, 0, layout_.elements(), false);
  std::fill(ticket_.begin(), ticket_.end(), 0);
}

int64_t ZeroLayers::held() const {
  int64_t n = 0;
  for (size_t i = 0; i < ranges_.size(); ++i)
    if (ticket_[i])
      for (auto [b, e] : ranges_[i]) n += e - b;
  return n;
}

void ZeroLayers::fetch(size_t i) {
  if (!gather_ || ticket_[i]) return;
  float* w = model_.params().params().f32();
  const nn::Ranges r = ranges_[i];
  ticket_[i] = queue_.push([this, w, r, i] {
    timeline::Span span("zero", "gather", "layer", int64_t(i));
    for (auto [b, e] : r) gather_range(comm_, layout_, w, b, e);
  });
  peak_gathered_ = std::max(peak_gathered_, held());
}

void ZeroLayers::wait_for(size_t i) {
  if (!gather_) return;
  Timer t;
  timeline::Span span("zero", "wait for gather", "layer", int64_t(i));
  queue_.wait(ticket_[i]);
  wait_s_ += t.seconds();
}

void ZeroLayers::drop(size_t i, const nn::Ranges& keep) {
  if (!gather_ || !ticket_[i]) return;
  float* w = model_.params().params().f32();
  for (auto [b, e] : ranges_[i])
    for (auto [lo, hi] : subtract(b, e, keep)) release_unowned(layout_, comm_.rank(), w, lo, hi, false);
  ticket_[i] = 0;
}

void ZeroLayers::before_forward(size_t i) {
  // A forward without backward (evaluation) left its last layer held.
  if (i == 0)
    for (size_t j = 2; j < ranges_.size(); ++j) drop(j, ranges_[0]);
  fetch(i);
  if (i + 1 < ranges_.size()) fetch(i + 1);
  wait_for(i);
}

void ZeroLayers::after_forward(size_t i) {
  if (i + 1 < ranges_.size()) drop(i, ranges_[i + 1]);  // the last stays for backward
}

void ZeroLayers::before_backward(size_t i) {
  // The embedding adds its rows into the matrix's gradient, which the head's
  // reduce-scatters may still be reading.
  if (i == slot_layer_ && row_stream() && armed_) wait_reductions();
  fetch(i);
  if (i > 0) fetch(i - 1);
  wait_for(i);
}

void ZeroLayers::after_backward(size_t i) {
  drop(i, i > 0 ? ranges_[i - 1] : nn::Ranges{});
  if (!armed_) return;
  const nn::Module& m = model_.layers().child(i);
  // --freeze: a frozen prefix has no gradient to reduce (layout_.first()).
  const int64_t b = std::max(m.param_begin(), layout_.first());
  if (m.param_end() <= b) return;
  const nn::Ranges parts = subtract(b, m.param_end(), {{slot_b_, slot_e_}});  // the matrix: ids_done
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) add_grads(it->first, it->second);
}

// Backward finishes layers last to first, so a bucket grows downwards.
void ZeroLayers::add_grads(int64_t b, int64_t e) {
  if (hi_ > lo_ && e != lo_) flush();
  if (hi_ == lo_) hi_ = e;
  lo_ = b;
  if (hi_ - lo_ >= bucket_) flush();
}

void ZeroLayers::flush() {
  if (hi_ == lo_) return;
  const int64_t b = lo_, e = hi_;
  peak_bucket_ = std::max(peak_bucket_, e - b);
  float* g = model_.params().grads().f32();
  reducing_.push_back(queue_.push([this, g, b, e] {
    timeline::Span span("zero", allreduce_ ? "all-reduce" : "reduce-scatter", nullptr, -1,
                        (e - b) * int64_t(sizeof(float)));
    if (allreduce_)
      comm_.allreduce(g + b, e - b, comm::ReduceOp::kSum, comm::Algorithm::kRing);
    else
      reduce_scatter_range(comm_, layout_, g, b, e, scratch_.data());
    release_unowned(layout_, comm_.rank(), g, b, e, true);
  }));
  lo_ = hi_ = 0;
  // At most kInFlight buckets wait to be reduced: where communication is
  // slower than backward (4 ranks on 2 cores) the queue would otherwise hold
  // nearly every layer's gradients by the end of backward (measured: gpt2
  // zero-2 on 4 ranks peaked as high as zero-1).
  constexpr size_t kInFlight = 2;
  while (reducing_.size() > kInFlight) {
    Timer t;
    queue_.wait(reducing_.front());
    wait_s_ += t.seconds();
    reducing_.pop_front();
  }
}

void ZeroLayers::finish_backward() {
  flush();
  wait_reductions();
}

void ZeroLayers::wait_reductions() {
  Timer t;
  queue_.drain();
  wait_s_ += t.seconds();
  reducing_.clear();
}

void ZeroLayers::gather_all(int root) {
  if (!gather_) return;
  float* w = model_.params().params().f32();
  queue_.wait(queue_.push([&] { gather_range(comm_, layout_, w, 0, layout_.elements(), root); }));
}

void ZeroLayers::release_all() {
  if (!gather_) return;
  shard_params();
}

}  // namespace cohort
