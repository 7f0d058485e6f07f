#include "parallel/model_parallel.h"

#include "core/clock.h"
#include "ops/loss.h"
#include "parallel/stages.h"

namespace cohort {

constexpr int kActivationTag = 100, kGradientTag = 101;

ModelParallel::ModelParallel(comm::Communicator& comm, nn::Model& model, Optimizer& opt,
                             std::vector<size_t> cuts)
    : comm_(comm), model_(model), opt_(opt), cuts_(std::move(cuts)) {
  COHORT_INPUT_CHECK(int(cuts_.size()) - 1 == comm.size(), "--stages ", cuts_.size() - 1,
                     " needs as many ranks, got ", comm.size());
  const int s = comm.rank();
  begin_ = cuts_[size_t(s)];
  end_ = cuts_[size_t(s) + 1];
  nn::Sequential& layers = model.layers();
  param_begin_ = layers.child(begin_).param_begin();
  param_end_ = layers.child(end_ - 1).param_end();
  // A stage's first layer must hand its input gradient back, except stage 0's.
  layers.child(begin_).set_needs_input_grad(s > 0);
}

StepResult ModelParallel::step(const Batch& batch, float lr, StepTimes& times) {
  Timer t;
  const int s = comm_.rank(), last = comm_.size() - 1;
  nn::Sequential& layers = model_.layers();
  nn::Context ctx;
  const int64_t n = int64_t(batch.labels.size());
  const Tensor* x = &batch.images;
  if (s > 0) {
    nn::ensure(x_, shape_before(layers, begin_, batch.images.shape()));
    Timer c;
    comm_.recv(x_.data(), x_.nbytes(), s - 1, kActivationTag);
    times.comm += c.seconds();
    x = &x_;
  }
  const Tensor& y = layers.forward_range(begin_, end_, *x, ctx);
  double metrics[2] = {0, 0};  // loss sum, correct: the last stage's, sent to all
  const Tensor* g = nullptr;
  if (s == last) {
    nn::ensure(dlogits_, y.shape());
    auto loss = ops::softmax_cross_entropy(y.f32(), batch.labels.data(), n, y.dim(1),
                                           dlogits_.f32(), 1.0f / float(n));
    metrics[0] = loss.loss_sum;
    metrics[1] = double(loss.correct);
    g = &dlogits_;
  } else {
    Timer c;
    comm_.send(y.data(), y.nbytes(), s + 1, kActivationTag);
    nn::ensure(g_, y.shape());
    comm_.recv(g_.data(), g_.nbytes(), s + 1, kGradientTag);
    times.comm += c.seconds();
    g = &g_;
  }
  const Tensor& dx = layers.backward_range(begin_, end_, *g, ctx);
  if (s > 0) {
    Timer c;
    comm_.send(dx.data(), dx.nbytes(), s - 1, kGradientTag);
    times.comm += c.seconds();
  }
  const Arena& a = model_.params();
  opt_.step(a.params().f32() + param_begin_, a.grads().f32() + param_begin_,
            param_end_ - param_begin_, lr);
  comm_.broadcast(metrics, sizeof metrics, last);
  times.compute += t.seconds();
  return {metrics[0], int64_t(metrics[1]), n};
}

void ModelParallel::sum(double* v, int n) { comm::sum_metrics(comm_, v, n); }

void ModelParallel::sync_model() { broadcast_stages(comm_, model_, cuts_); }

}  // namespace cohort
