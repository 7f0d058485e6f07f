#include "train/evaluate.h"

#include <algorithm>

#include "ops/loss.h"

namespace cohort {

EvalResult evaluate(nn::Model& model, const Dataset& data, int64_t batch) {
  nn::Context ctx;
  ctx.training = false;
  const int k = data.num_classes;
  std::vector<int64_t> seen(size_t(k), 0), right(size_t(k), 0);
  double loss_sum = 0;
  for (int64_t b = 0; b < data.size(); b += batch) {
    const int64_t e = std::min(data.size(), b + batch);
    const Tensor& logits = model.forward(data.images.slice(b, e), ctx);
    const int32_t* labels = data.labels.data() + b;
    loss_sum += ops::softmax_cross_entropy(logits.f32(), labels, e - b, k, nullptr, 1).loss_sum;
    for (int64_t i = 0; i < e - b; ++i) {
      const float* z = logits.f32() + i * k;
      const int arg = int(std::max_element(z, z + k) - z);
      seen[size_t(labels[i])]++;
      right[size_t(labels[i])] += (arg == labels[i]);
    }
  }
  EvalResult r;
  r.images = data.size();
  r.seen = seen;
  int64_t total_right = 0;
  for (int c = 0; c < k; ++c) {
    total_right += right[size_t(c)];
    r.per_class_accuracy.push_back(seen[size_t(c)] ? double(right[size_t(c)]) / seen[size_t(c)] : 0);
  }
  r.accuracy = r.images ? double(total_right) / r.images : 0;
  r.loss = r.images ? loss_sum / r.images : 0;
  return r;
}

}  // namespace cohort
