#include "train/evaluate.h"

#include <algorithm>

namespace cohort {

EvalResult evaluate(nn::Model& model, const Dataset& data, int64_t batch, int64_t batches,
                    const ImageTransform* images) {
  const bool resize = images && images->resize > 0;
  nn::Context ctx;
  ctx.training = false;
  const int k = data.num_classes;
  std::vector<int64_t> seen(size_t(k), 0), right(size_t(k), 0);
  double loss_sum = 0;
  const int64_t p = data.positions();
  const int64_t n = data.size();
  if (batches <= 0) batches = (n + batch - 1) / batch;
  for (int64_t j = 0; j < batches; ++j) {
    const int64_t b = n * j / batches, e = n * (j + 1) / batches;
    const Tensor& out = model.forward(
        resize ? images->resized(data.images.slice(b, e)) : data.images.slice(b, e), ctx);
    const int32_t* labels = data.labels.data() + b * p;
    loss_sum += model.loss().compute(out, labels, nullptr, 1).loss_sum;
    // Per class: the argmax of every prediction row against its target.
    const int64_t rows = out.numel() / k;
    for (int64_t i = 0; i < rows; ++i) {
      const float* z = out.f32() + i * k;
      const int arg = int(std::max_element(z, z + k) - z);
      seen[size_t(labels[i])]++;
      right[size_t(labels[i])] += (arg == labels[i]);
    }
  }
  EvalResult r;
  r.images = data.size();
  r.seen = seen;
  int64_t total_right = 0, total_seen = 0;
  for (int c = 0; c < k; ++c) {
    total_right += right[size_t(c)];
    total_seen += seen[size_t(c)];
    r.per_class_accuracy.push_back(seen[size_t(c)] ? double(right[size_t(c)]) / seen[size_t(c)] : 0);
  }
  r.accuracy = total_seen ? double(total_right) / double(total_seen) : 0;
  r.loss = r.images ? loss_sum / r.images : 0;
  return r;
}

std::vector<double> EvalResult::to_sums() const {
  const size_t k = seen.size();
  std::vector<double> v(2 + 2 * k, 0.0);
  v[0] = loss * double(images);
  v[1] = double(images);
  for (size_t c = 0; c < k; ++c) {
    v[2 + k + c] = double(seen[c]);
    v[2 + c] = per_class_accuracy[c] * double(seen[c]);
  }
  return v;
}

EvalResult EvalResult::from_sums(const std::vector<double>& v) {
  const size_t k = (v.size() - 2) / 2;
  EvalResult r;
  r.images = int64_t(v[1]);
  r.loss = v[1] > 0 ? v[0] / v[1] : 0;
  double right = 0, total = 0;
  for (size_t c = 0; c < k; ++c) {
    const double seen = v[2 + k + c], ok = v[2 + c];
    right += ok;
    total += seen;
    r.seen.push_back(int64_t(seen));
    r.per_class_accuracy.push_back(seen > 0 ? ok / seen : 0);
  }
  r.accuracy = total > 0 ? right / total : 0;
  return r;
}

}  // namespace cohort
