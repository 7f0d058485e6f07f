#include "parallel/stages.h"

#include <algorithm>
#include <sstream>

#include "core/clock.h"
#include "core/error.h"
#include "core/rng.h"

namespace cohort {

std::vector<size_t> balance_cuts(const std::vector<double>& w, int stages) {
  // Cut where the running total passes s/K of it, keeping at least one layer
  // per stage.
  const size_t n = w.size();
  std::vector<size_t> cuts = {0};
  double total = 0;
  for (double v : w) total += v;
  double running = 0;
  for (size_t i = 0; i < n && int(cuts.size()) < stages; ++i) {
    running += w[i];
    const size_t left = n - (i + 1);                     // layers after i
    const size_t needed = size_t(stages) - cuts.size();  // cuts still to place
    if (left < needed) break;
    if (running >= total * double(cuts.size()) / stages || left == needed) cuts.push_back(i + 1);
  }
  cuts.push_back(n);
  return cuts;
}

std::vector<size_t> split_cuts(const std::string& split, size_t n, int stages) {
  std::vector<size_t> cuts = {0};
  std::stringstream ss(split);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t v = 0;
    try {
      v = std::stoul(item);
    } catch (...) {
      throw InputError("--split: '" + item + "' is not a layer index");
    }
    COHORT_INPUT_CHECK(v > cuts.back() && v < n, "--split ", split, ": cut ", v,
                       " leaves a stage empty (cuts must rise strictly within 1..", n - 1, ")");
    cuts.push_back(v);
  }
  COHORT_INPUT_CHECK(int(cuts.size()) == stages, "--split ", split, " gives ", cuts.size(),
                     " stages, --stages says ", stages);
  cuts.push_back(n);
  return cuts;
}

std::vector<size_t> cut_stages(nn::Model& model, int stages, const std::string& split,
                               const std::vector<double>* weights) {
  nn::Sequential& layers = model.layers();
  const size_t n = layers.size();
  COHORT_INPUT_CHECK(stages >= 1, "--stages must be at least 1, got ", stages);
  COHORT_INPUT_CHECK(size_t(stages) <= n, "--stages ", stages, ": ", model.name(), " has only ",
                     n, " layers to place");
  if (!split.empty()) return split_cuts(split, n, stages);
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i)
    w[i] = weights ? weights->at(i) : double(layers.child(i).num_params());
  return balance_cuts(w, stages);
}
std::vector<double> time_layers(nn::Model& model, int64_t rows) {
  const LayerTimes t = time_layers_split(model, rows);
  std::vector<double> sum(t.forward.size());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = t.forward[i] + t.backward[i];
  return sum;
}

LayerTimes time_layers_split(nn::Model& model, int64_t rows, int runs) {
  nn::Sequential& layers = model.layers();
  const size_t n = layers.size();
  Shape shape = {rows};
  for (int64_t d : model.input_shape()) shape.push_back(d);
  // Images: uniform values; token models: ids drawn from the vocabulary.
  const bool tokens = model.spec().input.kind == nn::InputKind::kTokens;
  Tensor x = Tensor::empty(shape, tokens ? DType::kI32 : DType::kF32);
  Rng rng(42);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (tokens)
      x.i32()[i] = int32_t(rng.below(uint64_t(model.num_classes())));
    else
      x.f32()[i] = rng.uniform(-1.0f, 1.0f);
  }
  std::vector<Tensor> outs(n);
  LayerTimes best{std::vector<double>(n, 1e30), std::vector<double>(n, 1e30), {}};
  // Training-mode forwards move batch-norm statistics: put them back after.
  const Tensor& stats = model.buffers().params();
  std::vector<float> saved(stats.f32(), stats.f32() + model.buffers().size());
  Rng dropout(7);
  for (int rep = 0; rep < runs; ++rep) {  // the first run warms up (primitives, memory)
    nn::Context ctx;
    ctx.rng = &dropout;
    std::vector<double> f(n, 0.0), b(n, 0.0);
    const Tensor* h = &x;
    for (size_t i = 0; i < n; ++i) {
      Timer c;
      h = &layers.child(i).forward(*h, ctx);
      f[i] = c.seconds();
      nn::ensure(outs[i], h->shape());
      outs[i].fill(1.0f / float(h->numel()));
    }
    for (size_t i = n; i-- > 0;) {
      Timer c;
      layers.child(i).backward(outs[i], ctx);
      b[i] = c.seconds();
    }
    if (rep == 0) continue;
    double pass = 0;
    for (size_t i = 0; i < n; ++i) {
      best.forward[i] = std::min(best.forward[i], f[i]);
      best.backward[i] = std::min(best.backward[i], b[i]);
      pass += f[i] + b[i];
    }
    best.passes.push_back(pass);
  }
  std::copy(saved.begin(), saved.end(), stats.f32());
  return best;
}

Shape shape_before(nn::Sequential& layers, size_t i, Shape s) {
  for (size_t k = 0; k < i; ++k) s = layers.child(k).output_shape(s);
  return s;
}

void broadcast_stages(comm::Communicator& comm, nn::Model& model, const std::vector<size_t>& cuts) {
  nn::Sequential& layers = model.layers();
  for (int s = 0; s + 1 < int(cuts.size()); ++s) {
    const nn::Module& first = layers.child(cuts[size_t(s)]);
    const nn::Module& last = layers.child(cuts[size_t(s) + 1] - 1);
    const int64_t pb = first.param_begin(), pe = last.param_end();
    const Tensor params = model.params().params().slice(pb, pe);
    if (pe > pb) comm.broadcast(params.data(), params.nbytes(), s);
    const int64_t bb = first.buffer_begin(), be = last.buffer_end();
    const Tensor buffers = model.buffers().params().slice(bb, be);
    if (be > bb) comm.broadcast(buffers.data(), buffers.nbytes(), s);
  }
}

}  // namespace cohort
