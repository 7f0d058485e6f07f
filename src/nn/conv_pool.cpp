#include <omp.h>

#include <set>

#include "core/error.h"
#include "nn/layers.h"
#include "ops/elementwise.h"

namespace cohort::nn {

// A chunk's conv output stays in L2 (2 MiB per core here): 512 KiB per
// thread, since every thread works on the chunk. Measured on mnist-small,
// batch 128, images/s: 1 thread 256 KiB 9,676 / 512 KiB 9,993 / unchunked
// 6,158; 2 threads 256 KiB 12,365 / 512 KiB 13,066 / 1 MiB 13,920 / 4 MiB
// 12,997 / unchunked 12,865.
static int64_t chunk_bytes() { return int64_t(512 << 10) * omp_get_max_threads(); }

ConvPool::ConvPool(int64_t c_in, int64_t c_out, int64_t k, int64_t pad, int64_t pool)
    : c_in_(c_in), c_out_(c_out), k_(k), pad_(pad), pool_(pool) {}

std::vector<Module::Param> ConvPool::params() {
  const int64_t fan_in = c_in_ * k_ * k_;
  return {{"weight", {c_out_, c_in_, k_, k_}, Init::kUniformFanIn, fan_in, &weight_, &dweight_},
          {"bias", {c_out_}, Init::kUniformFanIn, fan_in, &b_, &db_}};
}

ops::ConvShape ConvPool::conv_shape(const Shape& x, DType dtype) const {
  COHORT_CHECK(x.size() == 4 && x[3] == c_in_, "conv expects {N,H,W,", c_in_, "}, got ",
               shape_str(x));
  return {x[0], x[1], x[2], c_in_, c_out_, k_, k_, 1, pad_, dtype};
}

Shape ConvPool::output_shape(const Shape& in) const {
  auto s = conv_shape(in);
  return {s.n, s.out_h() / pool_, s.out_w() / pool_, c_out_};
}

double ConvPool::flops(const Shape& in) const {
  return conv_shape({1, in[0], in[1], in[2]}).forward_flops();
}

int64_t ConvPool::chunk_size(const Shape& x, DType dtype) const {
  auto s = conv_shape(x, dtype);
  const int64_t per_image = int64_t(dtype_bytes(s.dtype, s.out_h() * s.out_w() * c_out_));
  const int64_t most = std::max<int64_t>(1, std::min<int64_t>(x[0], chunk_bytes() / per_image));
  // Equal chunks (128 as 64 + 64, not 113 + 15): a thin last chunk runs its
  // own, slower primitives.
  const int64_t chunks = (x[0] + most - 1) / most;
  return (x[0] + chunks - 1) / chunks;
}

ConvPool::Ops& ConvPool::ops_for(const Shape& x_chunk, DType dtype, Context& ctx) {
  Ops& o = ops_[{dtype, x_chunk}];
  if (!o.conv) {
    auto s = conv_shape(x_chunk, dtype);
    o.conv = ops::make_conv2d(ctx.device, s, true);
    o.pool = ops::make_max_pool2d(ctx.device,
                                  {s.n, s.out_h(), s.out_w(), c_out_, pool_, pool_, dtype});
  }
  return o;
}

const Tensor& ConvPool::forward(const Tensor& x, Context& ctx) {
  x_ = x;
  const int64_t n = x.dim(0), chunk = chunk_size(x.shape(), x.dtype());
  const auto cs = conv_shape(x.shape());
  ensure(y_, output_shape(x.shape()), x.dtype());
  ensure(scratch_, {chunk, cs.out_h(), cs.out_w(), c_out_}, x.dtype());
  Shape full = x.shape();
  full[0] = chunk;
  ws_stride_ = (ops_for(full, x.dtype(), ctx).pool->workspace_bytes() + 63) / 64 * 64;
  workspace_.resize(ws_stride_ * size_t((n + chunk - 1) / chunk));
  std::set<ops::Conv2d*> prepared;  // lay the weights out once per op per step
  for (int64_t b = 0, i = 0; b < n; b += chunk, ++i) {
    const int64_t e = std::min(n, b + chunk);
    Shape xs = x.shape();
    xs[0] = e - b;
    Ops& o = ops_for(xs, x.dtype(), ctx);
    const bool fresh = prepared.insert(o.conv.get()).second;
    o.conv->forward(x.slice(b, e), fresh ? ConstView(weight_) : nullptr, b_, scratch_);
    o.pool->forward(scratch_, y_.slice(b, e), workspace_.data() + ws_stride_ * i);
  }
  return y_;
}

const Tensor& ConvPool::backward(const Tensor& dy, Context& ctx) {
  fused_relu_grad(dy, y_, true, dmasked_);
  if (needs_input_grad_) ensure(dx_, x_.shape(), x_.dtype());
  const int64_t n = x_.dim(0), chunk = chunk_size(x_.shape(), x_.dtype());
  std::set<ops::Conv2d*> prepared;
  for (int64_t b = 0, i = 0; b < n; b += chunk, ++i) {
    const int64_t e = std::min(n, b + chunk);
    Shape xs = x_.shape();
    xs[0] = e - b;
    Ops& o = ops_for(xs, x_.dtype(), ctx);
    o.pool->backward(dmasked_.slice(b, e), scratch_, workspace_.data() + ws_stride_ * i);
    o.conv->backward_weights(x_.slice(b, e), scratch_, dweight_, db_, ctx.accumulate || b > 0);
    if (needs_input_grad_) {
      const bool fresh = prepared.insert(o.conv.get()).second;
      o.conv->backward_data(scratch_, fresh ? ConstView(weight_) : nullptr, dx_.slice(b, e));
    }
  }
  return dx_;
}

}  // namespace cohort::nn
