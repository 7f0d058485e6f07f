// Reference implementations for the op harness: see reference.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

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
      const int64_t ih = oh * s.stride - s.pad + kh, iw = ow * s.stride - s.pad + kw;
      if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;  // padding: -inf
      const int64_t idx = nhwc(n, ih, iw, c, s.h, s.w, s.c);
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

namespace {
// Calls f(output index, input indices of its bin) for every output element;
// PyTorch's bin of cell i: [floor(i n / out), ceil((i + 1) n / out)).
template <class F>
void for_each_bin(const ops::AdaptivePoolShape& s, F&& f) {
  auto bin = [](int64_t i, int64_t n, int64_t out) {
    return std::pair<int64_t, int64_t>{i * n / out, ((i + 1) * n + out - 1) / out};
  };
  std::vector<int64_t> in;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t i = 0; i < s.out_h; ++i)
      for (int64_t j = 0; j < s.out_w; ++j)
        for (int64_t c = 0; c < s.c; ++c) {
          const auto [h0, h1] = bin(i, s.h, s.out_h);
          const auto [w0, w1] = bin(j, s.w, s.out_w);
          in.clear();
          for (int64_t a = h0; a < h1; ++a)
            for (int64_t b = w0; b < w1; ++b) in.push_back(nhwc(n, a, b, c, s.h, s.w, s.c));
          f(nhwc(n, i, j, c, s.out_h, s.out_w, s.c), in);
        }
}
}  // namespace

void adaptive_avg_pool_forward(const ops::AdaptivePoolShape& s, const float* x, float* y) {
  for_each_bin(s, [&](int64_t out, const std::vector<int64_t>& in) {
    double acc = 0;
    for (int64_t k : in) acc += x[k];
    y[out] = float(acc / double(in.size()));
  });
}

void adaptive_avg_pool_backward(const ops::AdaptivePoolShape& s, const float* dy, float* dx) {
  std::vector<double> acc(size_t(s.n * s.h * s.w * s.c), 0.0);
  for_each_bin(s, [&](int64_t out, const std::vector<int64_t>& in) {
    for (int64_t k : in) acc[size_t(k)] += double(dy[out]) / double(in.size());
  });
  for (size_t i = 0; i < acc.size(); ++i) dx[i] = float(acc[i]);
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

// ---------------------------------------------------------------- transformer ops

void embedding_forward(const ops::EmbeddingShape& s, const int32_t* ids, const float* wte,
                       const float* wpe, float* y) {
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t t = 0; t < s.t; ++t)
      for (int64_t c = 0; c < s.c; ++c)
        y[(b * s.t + t) * s.c + c] =
            float(double(wte[ids[b * s.t + t] * s.c + c]) + double(wpe[t * s.c + c]));
}

void embedding_backward(const ops::EmbeddingShape& s, const int32_t* ids, const float* dy,
                        float* dwte, float* dwpe) {
  std::vector<double> tok(size_t(s.vocab * s.c), 0.0), pos(size_t(s.t * s.c), 0.0);
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t t = 0; t < s.t; ++t)
      for (int64_t c = 0; c < s.c; ++c) {
        const double g = dy[(b * s.t + t) * s.c + c];
        tok[size_t(ids[b * s.t + t] * s.c + c)] += g;
        pos[size_t(t * s.c + c)] += g;
      }
  for (size_t i = 0; i < tok.size(); ++i) dwte[i] = float(tok[i]);
  for (size_t i = 0; i < pos.size(); ++i) dwpe[i] = float(pos[i]);
}

namespace {
// Mean and 1/sqrt(biased variance + eps) of one row.
std::pair<double, double> row_stats(const float* x, int64_t c, float eps) {
  double sum = 0;
  for (int64_t k = 0; k < c; ++k) sum += x[k];
  const double mean = sum / double(c);
  double sq = 0;
  for (int64_t k = 0; k < c; ++k) sq += (x[k] - mean) * (x[k] - mean);
  return {mean, 1.0 / std::sqrt(sq / double(c) + double(eps))};
}
}  // namespace

void layer_norm_forward(const ops::LayerNormShape& s, const float* x, const float* gamma,
                        const float* beta, float* y) {
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* xr = x + r * s.c;
    const auto [mean, rstd] = row_stats(xr, s.c, s.eps);
    for (int64_t k = 0; k < s.c; ++k)
      y[r * s.c + k] = float(double(gamma[k]) * (xr[k] - mean) * rstd + double(beta[k]));
  }
}

void layer_norm_backward(const ops::LayerNormShape& s, const float* x, const float* dy,
                         const float* gamma, float* dx, float* dgamma, float* dbeta) {
  // Per row, with xhat = (x - mean) rstd and g = gamma * dy:
  //   dx = rstd * (g - mean(g) - xhat * mean(g * xhat));
  // dgamma = sum over rows of dy * xhat, dbeta = sum of dy.
  std::vector<double> dg(size_t(s.c), 0.0), db(size_t(s.c), 0.0);
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* xr = x + r * s.c;
    const float* dyr = dy + r * s.c;
    const auto [mean, rstd] = row_stats(xr, s.c, s.eps);
    double sum_g = 0, sum_g_xhat = 0;
    for (int64_t k = 0; k < s.c; ++k) {
      const double xhat = (xr[k] - mean) * rstd, g = double(gamma[k]) * dyr[k];
      sum_g += g;
      sum_g_xhat += g * xhat;
      dg[size_t(k)] += dyr[k] * xhat;
      db[size_t(k)] += dyr[k];
    }
    for (int64_t k = 0; k < s.c; ++k) {
      const double xhat = (xr[k] - mean) * rstd, g = double(gamma[k]) * dyr[k];
      dx[r * s.c + k] =
          float(rstd * (g - sum_g / double(s.c) - xhat * sum_g_xhat / double(s.c)));
    }
  }
  for (int64_t k = 0; k < s.c; ++k) dgamma[k] = float(dg[size_t(k)]), dbeta[k] = float(db[size_t(k)]);
}

namespace {
constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluCube = 0.044715;
}  // namespace

void gelu_forward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = float(0.5 * v * (1.0 + std::tanh(kGeluScale * (v + kGeluCube * v * v * v))));
  }
}

void gelu_backward(const float* dy, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i], u = kGeluScale * (v + kGeluCube * v * v * v), th = std::tanh(u);
    const double du = kGeluScale * (1.0 + 3.0 * kGeluCube * v * v);
    dx[i] = float(dy[i] * (0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * du));
  }
}

namespace {
// Probabilities att[b][h][i][j] (j <= i; 0 above the diagonal) of causal
// attention, as llm.c's attention_forward computes them.
std::vector<double> attention_probs(const ops::AttentionShape& s, const float* qkv) {
  const int64_t T = s.t, C = s.c, NH = s.heads, HS = s.head_size();
  const double scale = 1.0 / std::sqrt(double(HS));
  std::vector<double> att(size_t(s.b * NH * T * T), 0.0);
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const float* q = qkv + (b * T + i) * 3 * C + h * HS;
        double* a = att.data() + ((b * NH + h) * T + i) * T;
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          const float* k = qkv + (b * T + j) * 3 * C + C + h * HS;
          double dot = 0;
          for (int64_t d = 0; d < HS; ++d) dot += double(q[d]) * double(k[d]);
          a[j] = dot * scale;
          mx = std::max(mx, a[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += (a[j] = std::exp(a[j] - mx));
        for (int64_t j = 0; j <= i; ++j) a[j] /= sum;
      }
  return att;
}
}  // namespace

void attention_forward(const ops::AttentionShape& s, const float* qkv, float* out) {
  const int64_t T = s.t, C = s.c, NH = s.heads, HS = s.head_size();
  const std::vector<double> att = attention_probs(s, qkv);
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t d = 0; d < HS; ++d) {
          double acc = 0;
          for (int64_t j = 0; j <= i; ++j)
            acc += att[size_t(((b * NH + h) * T + i) * T + j)] *
                   double(qkv[(b * T + j) * 3 * C + 2 * C + h * HS + d]);
          out[(b * T + i) * C + h * HS + d] = float(acc);
        }
}

void attention_backward(const ops::AttentionShape& s, const float* qkv, const float* dout,
                        float* dqkv) {
  const int64_t T = s.t, C = s.c, NH = s.heads, HS = s.head_size();
  const double scale = 1.0 / std::sqrt(double(HS));
  const std::vector<double> att = attention_probs(s, qkv);
  std::vector<double> acc(static_cast<size_t>(s.b * T * 3 * C), 0.0);
  std::vector<double> datt(static_cast<size_t>(T));
  // Offset of head h of part (0 q, 1 k, 2 v) at token (b, t) in qkv {B, T, 3C}.
  auto q = [&](int64_t b, int64_t t, int64_t h, int64_t part) {
    return (b * T + t) * 3 * C + part * C + h * HS;
  };
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const double* a = att.data() + ((b * NH + h) * T + i) * T;
        const float* dy = dout + (b * T + i) * C + h * HS;
        // datt = dout v^T; dv += att^T dout.
        double dot_sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double d = 0;
          for (int64_t e = 0; e < HS; ++e) {
            d += double(dy[e]) * double(qkv[q(b, j, h, 2) + e]);
            acc[size_t(q(b, j, h, 2) + e)] += a[j] * double(dy[e]);
          }
          datt[size_t(j)] = d;
          dot_sum += a[j] * d;
        }
        // Softmax backward, then the scaled scores' products.
        for (int64_t j = 0; j <= i; ++j) {
          const double dpre = a[j] * (datt[size_t(j)] - dot_sum) * scale;
          for (int64_t e = 0; e < HS; ++e) {
            acc[size_t(q(b, i, h, 0) + e)] += dpre * double(qkv[q(b, j, h, 1) + e]);
            acc[size_t(q(b, j, h, 1) + e)] += dpre * double(qkv[q(b, i, h, 0) + e]);
          }
        }
      }
  for (size_t i = 0; i < acc.size(); ++i) dqkv[i] = float(acc[i]);
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
