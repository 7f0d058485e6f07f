#include "parallel/replicas.h"

#include <omp.h>

#include <exception>
#include <thread>

#include "core/clock.h"
#include "core/error.h"
#include "nn/models/zoo.h"
#include "ops/elementwise.h"

namespace cohort {

Replicas::Replicas(nn::Model& master, Optimizer& opt, int replicas, int threads, uint64_t seed,
                   float clip_norm)
    : master_(master), threads_(std::max(1, threads)), master_step_(master, opt, seed, clip_norm) {
  COHORT_INPUT_CHECK(replicas >= 1, "--replicas must be at least 1, got ", replicas);
  for (int r = 1; r < replicas; ++r) {
    models_.push_back(nn::make_model(master.name(), seed));
    steps_.push_back(std::make_unique<LocalStep>(*models_.back(), opt, seed + uint64_t(r)));
  }
}

// Rows [begin, end) of a batch, sharing its memory.
static Batch slice(const Batch& b, int64_t begin, int64_t end) {
  Batch s;
  s.images = b.images.slice(begin, end);
  s.labels.assign(b.labels.begin() + begin, b.labels.begin() + end);
  return s;
}

StepResult Replicas::step(const Batch& batch, float lr, StepTimes& times) {
  Timer t;
  const int n = int(models_.size()) + 1;
  const int64_t size = int64_t(batch.labels.size());
  COHORT_INPUT_CHECK(size >= n, "--replicas ", n, " needs a batch of at least ", n, ", got ",
                     size);
  const float scale = 1.0f / float(size);  // mean over the whole batch, as one process
  std::vector<StepResult> results(static_cast<size_t>(n));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  auto work = [&](int r) {
    try {
      omp_set_num_threads(threads_);
      nn::Model& m = r == 0 ? master_ : *models_[size_t(r - 1)];
      LocalStep& s = r == 0 ? master_step_ : *steps_[size_t(r - 1)];
      if (r > 0) {  // replicate: the master's weights and buffers
        m.params().params().copy_from(master_.params().params());
        m.buffers().params().copy_from(master_.buffers().params());
      }
      nn::Context ctx;
      results[size_t(r)] = s.forward_backward(slice(batch, size * r / n, size * (r + 1) / n),
                                              scale, ctx);
    } catch (...) {
      errors[size_t(r)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int r = 1; r < n; ++r) pool.emplace_back(work, r);
  const int caller_threads = omp_get_max_threads();
  work(0);
  omp_set_num_threads(caller_threads);
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  // Reduce to the master, then one optimizer step there.
  const Tensor& g = master_.params().grads();
  for (auto& m : models_) ops::add_inplace(g.f32(), m->params().grads().f32(), g.numel());
  master_step_.apply(lr);
  times.compute += t.seconds();
  StepResult total;
  for (auto& r : results) {
    total.loss_sum += r.loss_sum;
    total.correct += r.correct;
    total.images += r.images;
  }
  return total;
}

}  // namespace cohort
