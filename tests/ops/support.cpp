// Reference implementations for the op harness: see reference.h.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/reference.h"

namespace cohort::ref {

namespace {
// Flat index helpers, spelled out once.
inline int64_t nhwc(int64_t n, int64_t h, int64_t w, int64_t c, int64_t H, int64_t W, int64_t C) {
  return ((n * H + h) * W + w) * C + c;
}
inline int64_t oihw(int64_t o, int64_t i, int64_t kh, int64_t kw, int64_t I, int64_t KH,
                    int64_t KW) {
  return ((o * I + i) * KH + kh) * KW + kw;
}
}  // namespace

// ---------------------------------------------------------------- conv2d

void conv2d_forward(const ops::ConvShape& s, bool relu, const float* x, const float* w,
                    const float* b, float* y) {
  const int64_t OH = s.out_h(), OW = s.out_w();
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t co = 0; co < s.c_out; ++co) {
          double acc = b ? double(b[co]) : 0.0;
          for (int64_t kh = 0; kh < s.kh; ++kh)
            for (int64_t kw = 0; kw < s.kw; ++kw) {
              const int64_t ih = oh * s.stride - s.pad + kh, iw = ow * s.stride - s.pad + kw;
              if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;  // zero padding
              for (int64_t ci = 0; ci < s.c_in; ++ci)
                acc += double(x[nhwc(n, ih, iw, ci, s.h, s.w, s.c_in)]) *
                       double(w[oihw(co, ci, kh, kw, s.c_in, s.kh, s.kw)]);
            }
          if (relu && acc < 0) acc = 0;
          y[nhwc(n, oh, ow, co, OH, OW, s.c_out)] = float(acc);
        }
}

void conv2d_backward_data(const ops::ConvShape& s, const float* dy, const float* w, float* dx) {
  const int64_t OH = s.out_h(), OW = s.out_w();
  std::vector<double> acc(size_t(s.n * s.h * s.w * s.c_in), 0.0);
  // Scatter: every (output, tap) pair that read x[ih, iw, ci] sends dy * w back.
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t co = 0; co < s.c_out; ++co) {
          const double g = dy[nhwc(n, oh, ow, co, OH, OW, s.c_out)];
          for (int64_t kh = 0; kh < s.kh; ++kh)
            for (int64_t kw = 0; kw < s.kw; ++kw) {
              const int64_t ih = oh * s.stride - s.pad + kh, iw = ow * s.stride - s.pad + kw;
              if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
              for (int64_t ci = 0; ci < s.c_in; ++ci)
                acc[size_t(nhwc(n, ih, iw, ci, s.h, s.w, s.c_in))] +=
                    g * double(w[oihw(co, ci, kh, kw, s.c_in, s.kh, s.kw)]);
            }
        }
  for (size_t i = 0; i < acc.size(); ++i) dx[i] = float(acc[i]);
}

void conv2d_backward_weights(const ops::ConvShape& s, const float* x, const float* dy, float* dw,
                             float* db) {
  const int64_t OH = s.out_h(), OW = s.out_w();
  for (int64_t co = 0; co < s.c_out; ++co) {
    for (int64_t ci = 0; ci < s.c_in; ++ci)
      for (int64_t kh = 0; kh < s.kh; ++kh)
        for (int64_t kw = 0; kw < s.kw; ++kw) {
          double acc = 0;
          for (int64_t n = 0; n < s.n; ++n)
            for (int64_t oh = 0; oh < OH; ++oh)
              for (int64_t ow = 0; ow < OW; ++ow) {
                const int64_t ih = oh * s.stride - s.pad + kh, iw = ow * s.stride - s.pad + kw;
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                acc += double(dy[nhwc(n, oh, ow, co, OH, OW, s.c_out)]) *
                       double(x[nhwc(n, ih, iw, ci, s.h, s.w, s.c_in)]);
              }
          dw[oihw(co, ci, kh, kw, s.c_in, s.kh, s.kw)] = float(acc);
        }
    if (db) {
      double acc = 0;
      for (int64_t n = 0; n < s.n; ++n)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) acc += dy[nhwc(n, oh, ow, co, OH, OW, s.c_out)];
      db[co] = float(acc);
    }
  }
}

// ---------------------------------------------------------------- linear

void linear_forward(const ops::LinearShape& s, bool relu, const float* x, const float* w,
                    const float* b, float* y) {
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.out; ++o) {
      double acc = b ? double(b[o]) : 0.0;
      for (int64_t i = 0; i < s.in; ++i) acc += double(x[n * s.in + i]) * double(w[o * s.in + i]);
      if (relu && acc < 0) acc = 0;
      y[n * s.out + o] = float(acc);
    }
}

void linear_backward_data(const ops::LinearShape& s, const float* dy, const float* w, float* dx) {
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t i = 0; i < s.in; ++i) {
      double acc = 0;
      for (int64_t o = 0; o < s.out; ++o)
        acc += double(dy[n * s.out + o]) * double(w[o * s.in + i]);
      dx[n * s.in + i] = float(acc);
    }
}

void linear_backward_weights(const ops::LinearShape& s, const float* x, const float* dy, float* dw,
                             float* db) {
  for (int64_t o = 0; o < s.out; ++o) {
    for (int64_t i = 0; i < s.in; ++i) {
      double acc = 0;
      for (int64_t n = 0; n < s.n; ++n) acc += double(dy[n * s.out + o]) * double(x[n * s.in + i]);
      dw[o * s.in + i] = float(acc);
    }
    if (db) {
      double acc = 0;
      for (int64_t n = 0; n < s.n; ++n) acc += dy[n * s.out + o];
      db[o] = float(acc);
    }
  }
}

// ---------------------------------------------------------------- pooling

namespace {
// Flat NHWC index of the first maximum of output (n, oh, ow, c)'s window.
int64_t pool_argmax(const ops::PoolShape& s, const float* x, int64_t n, int64_t oh, int64_t ow,
                    int64_t c) {
  int64_t best = -1;
  for (int64_t kh = 0; kh < s.k; ++kh)
    for (int64_t kw = 0; kw < s.k; ++kw) {
      const int64_t idx = nhwc(n, oh * s.stride + kh, ow * s.stride + kw, c, s.h, s.w, s.c);
      if (best < 0 || x[idx] > x[best]) best = idx;
    }
  return best;
}
}  // namespace

void max_pool_forward(const ops::PoolShape& s, const float* x, float* y) {
  const int64_t OH = s.out_h(), OW = s.out_w();
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t c = 0; c < s.c; ++c)
          y[nhwc(n, oh, ow, c, OH, OW, s.c)] = x[pool_argmax(s, x, n, oh, ow, c)];
}

void max_pool_backward(const ops::PoolShape& s, const float* x, const float* dy, float* dx) {
  const int64_t OH = s.out_h(), OW = s.out_w();
  std::vector<double> acc(size_t(s.n * s.h * s.w * s.c), 0.0);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t c = 0; c < s.c; ++c)
          acc[size_t(pool_argmax(s, x, n, oh, ow, c))] += dy[nhwc(n, oh, ow, c, OH, OW, s.c)];
  for (size_t i = 0; i < acc.size(); ++i) dx[i] = float(acc[i]);
}

void global_avg_pool_forward(const float* x, float* y, int64_t n, int64_t hw, int64_t c) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k) {
      double acc = 0;
      for (int64_t p = 0; p < hw; ++p) acc += x[(i * hw + p) * c + k];
      y[i * c + k] = float(acc / double(hw));
    }
}

void global_avg_pool_backward(const float* dy, float* dx, int64_t n, int64_t hw, int64_t c) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t k = 0; k < c; ++k) dx[(i * hw + p) * c + k] = float(double(dy[i * c + k]) / double(hw));
}

// ---------------------------------------------------------------- batch-norm

BnStats batch_norm_stats(const ops::BatchNormShape& s, const float* x) {
  const int64_t m = s.n * s.h * s.w;
  BnStats st;
  st.mean.assign(size_t(s.c), 0.0);
  st.var.assign(size_t(s.c), 0.0);
  for (int64_t c = 0; c < s.c; ++c) {
    double sum = 0;
    for (int64_t p = 0; p < m; ++p) sum += x[p * s.c + c];
    const double mean = sum / double(m);
    double sq = 0;
    for (int64_t p = 0; p < m; ++p) sq += (x[p * s.c + c] - mean) * (x[p * s.c + c] - mean);
    st.mean[size_t(c)] = mean;
    st.var[size_t(c)] = sq / double(m);  // biased: what normalization uses
  }
  return st;
}

void batch_norm_train_forward(const ops::BatchNormShape& s, const float* x, const float* gamma,
                              const float* beta, float* y) {
  const int64_t m = s.n * s.h * s.w;
  const BnStats st = batch_norm_stats(s, x);
  for (int64_t c = 0; c < s.c; ++c) {
    const double inv = 1.0 / std::sqrt(st.var[size_t(c)] + double(s.eps));
    for (int64_t p = 0; p < m; ++p)
      y[p * s.c + c] =
          float(double(gamma[c]) * (x[p * s.c + c] - st.mean[size_t(c)]) * inv + double(beta[c]));
  }
}

void batch_norm_running_update(const ops::BatchNormShape& s, const float* x, float* running_mean,
                               float* running_var) {
  const int64_t m = s.n * s.h * s.w;
  const BnStats st = batch_norm_stats(s, x);
  const double mom = s.momentum;
  for (int64_t c = 0; c < s.c; ++c) {
    const double unbiased = st.var[size_t(c)] * double(m) / double(m - 1);
    running_mean[c] = float((1 - mom) * running_mean[c] + mom * st.mean[size_t(c)]);
    running_var[c] = float((1 - mom) * running_var[c] + mom * unbiased);
  }
}

void batch_norm_infer_forward(const ops::BatchNormShape& s, const float* x, const float* gamma,
                              const float* beta, const float* running_mean,
                              const float* running_var, float* y) {
  const int64_t m = s.n * s.h * s.w;
  for (int64_t c = 0; c < s.c; ++c) {
    const double inv = 1.0 / std::sqrt(double(running_var[c]) + double(s.eps));
    for (int64_t p = 0; p < m; ++p)
      y[p * s.c + c] =
          float(double(gamma[c]) * (x[p * s.c + c] - double(running_mean[c])) * inv + beta[c]);
  }
}

void batch_norm_backward(const ops::BatchNormShape& s, const float* x, const float* dy,
                         const float* gamma, float* dx, float* dgamma, float* dbeta) {
  // y = gamma * xhat + beta, xhat = (x - mean) / sqrt(var + eps), mean and var
  // over the m = N*H*W positions of a channel:
  //   dbeta = sum dy, dgamma = sum dy * xhat,
  //   dx = gamma / sqrt(var + eps) * (dy - mean(dy) - xhat * mean(dy * xhat)).
  const int64_t m = s.n * s.h * s.w;
  const BnStats st = batch_norm_stats(s, x);
  for (int64_t c = 0; c < s.c; ++c) {
    const double inv = 1.0 / std::sqrt(st.var[size_t(c)] + double(s.eps));
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t p = 0; p < m; ++p) {
      const double xhat = (x[p * s.c + c] - st.mean[size_t(c)]) * inv;
      sum_dy += dy[p * s.c + c];
      sum_dy_xhat += dy[p * s.c + c] * xhat;
    }
    dbeta[c] = float(sum_dy);
    dgamma[c] = float(sum_dy_xhat);
    for (int64_t p = 0; p < m; ++p) {
      const double xhat = (x[p * s.c + c] - st.mean[size_t(c)]) * inv;
      dx[p * s.c + c] = float(double(gamma[c]) * inv *
                              (dy[p * s.c + c] - sum_dy / double(m) - xhat * sum_dy_xhat / double(m)));
    }
  }
}

// ---------------------------------------------------------------- elementwise

void relu_forward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
}

void relu_backward(const float* dy, const float* y, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0 ? dy[i] : 0.0f;
}

void add(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = float(double(a[i]) + double(b[i]));
}

void dropout_apply(const float* x, const float* mask, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = float(double(x[i]) * double(mask[i]));
}

void dropout2d_apply(const float* x, const float* mask, float* y, int64_t n, int64_t hw,
                     int64_t c) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t k = 0; k < c; ++k)
        y[(i * hw + p) * c + k] = float(double(x[(i * hw + p) * c + k]) * double(mask[i * c + k]));
}

void nhwc_to_nchw(const float* x, float* y, int64_t n, int64_t h, int64_t w, int64_t c) {
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ih = 0; ih < h; ++ih)
      for (int64_t iw = 0; iw < w; ++iw)
        for (int64_t ic = 0; ic < c; ++ic)
          y[((in * c + ic) * h + ih) * w + iw] = x[((in * h + ih) * w + iw) * c + ic];
}

void nchw_to_nhwc(const float* x, float* y, int64_t n, int64_t c, int64_t h, int64_t w) {
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ih = 0; ih < h; ++ih)
      for (int64_t iw = 0; iw < w; ++iw)
        for (int64_t ic = 0; ic < c; ++ic)
          y[((in * h + ih) * w + iw) * c + ic] = x[((in * c + ic) * h + ih) * w + iw];
}

// ---------------------------------------------------------------- loss

LossRef softmax_cross_entropy(const float* logits, const int32_t* labels, int64_t n, int64_t k,
                              float* dlogits, float grad_scale) {
  LossRef r;
  for (int64_t i = 0; i < n; ++i) {
    const float* z = logits + i * k;
    double zmax = z[0];
    int64_t arg = 0;
    for (int64_t j = 1; j < k; ++j)
      if (z[j] > z[arg]) arg = j, zmax = z[j];
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(double(z[j]) - zmax);
    const double lse = zmax + std::log(sum);
    r.loss_sum += lse - double(z[labels[i]]);
    r.correct += arg == labels[i];
    if (dlogits)
      for (int64_t j = 0; j < k; ++j) {
        const double p = std::exp(double(z[j]) - lse);
        dlogits[i * k + j] = float((p - (j == labels[i] ? 1.0 : 0.0)) * double(grad_scale));
      }
  }
  return r;
}

// ---------------------------------------------------------------- helpers

double max_abs(const float* a, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double(a[i])));
  return m;
}

double rel_error(const float* a, const float* b, int64_t n) {
  double err = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    err = std::max(err, d);
  }
  return err / std::max(1.0, max_abs(b, n));
}

}  // namespace cohort::ref
