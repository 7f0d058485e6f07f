#include "bench/peak.h"

#include <cmath>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "core/rng.h"
#include "ops/linear.h"

namespace cohort {

double measure_matmul_gflops(int size, int reps) {
  const int64_t n = size;
  // A linear layer without bias is exactly dst = src x W^T.
  auto op = ops::make_linear(Device::kCpu, {n, n, n}, false);
  std::vector<float> a(size_t(n * n)), b(size_t(n * n)), c(size_t(n * n));
  Rng rng(1);
  for (auto& v : a) v = rng.uniform(-1, 1);
  for (auto& v : b) v = rng.uniform(-1, 1);
  op->forward(a.data(), b.data(), nullptr, c.data());
  // Validate a few entries against a plain dot product before timing.
  for (int64_t t = 0; t < 4; ++t) {
    const int64_t i = (t * 977) % n, j = (t * 1231) % n;
    double ref = 0;
    for (int64_t k = 0; k < n; ++k) ref += double(a[size_t(i * n + k)]) * b[size_t(j * n + k)];
    COHORT_CHECK(std::fabs(ref - c[size_t(i * n + j)]) < 1e-2 * (1 + std::fabs(ref)),
                 "matmul peak: wrong result");
  }
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    Timer t;
    op->forward(a.data(), b.data(), nullptr, c.data());
    best = std::min(best, t.seconds());
  }
  return 2.0 * n * n * n / best / 1e9;
}

}  // namespace cohort
