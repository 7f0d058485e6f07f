// Causal multi-head self-attention on oneDNN: batched matmuls over the batch
// dims {B, NH} that read q, k and v in place inside qkv {B, T, 3C} through
// strided memory descriptors (head h of q at column h*HS, row stride 3C; k^T
// and v^T are the same memory with the last two strides swapped), and write
// out {B, T, C} and dqkv the same way; softmax and its backward are oneDNN's
// (jit, f32). The scale 1/sqrt(HS) is the matmuls' output scale, and the
// causal mask is -inf written over the upper triangle before the softmax
// (whose exp gives exactly 0 there, so masked probabilities and their
// gradients are 0). The products run over whole T x T blocks, masked ones
// included (twice the causal flops; a flash-style tiling would skip them).
// bf16: the matmuls take bf16 q, k, v, dout and bf16 copies of the f32
// probabilities (and of their gradient), and write f32 scores or bf16 outputs.
#include "ops/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/dnnl_util.h"

namespace cohort::ops {
namespace {

using namespace cpu;
using dims = memory::dims;

// A matmul dst = scale * (a x b) over the batch dims, built once.
dnnl::matmul make_matmul(const memory::desc& a, const memory::desc& b, const memory::desc& dst,
                         float scale = 1.0f) {
  dnnl::primitive_attr attr;
  if (scale != 1.0f) attr.set_output_scales(0, {scale});
  dnnl::matmul m;
  COHORT_DNNL(m = dnnl::matmul(
                  dnnl::matmul::primitive_desc(
                      dnnl::matmul::desc(kernel_md(a), kernel_md(b), kernel_md(dst)), attr,
                      engine())));
  return m;
}

class CpuAttention final : public Attention {
 public:
  explicit CpuAttention(const AttentionShape& s) : s_(s) {
    const int64_t B = s.b, NH = s.heads, T = s.t, C = s.c, HS = s.head_size();
    const auto dt = dnnl_type(s.dtype), f32 = memory::data_type::f32;
    // Views into qkv or dqkv {B, T, 3C}: one head's rows {T, HS}, and transposed {HS, T}.
    const memory::desc head(dims{B, NH, T, HS}, dt, dims{T * 3 * C, HS, 3 * C, 1});
    const memory::desc head_t(dims{B, NH, HS, T}, dt, dims{T * 3 * C, HS, 1, 3 * C});
    // out or dout {B, T, C}, one head's rows.
    const memory::desc out(dims{B, NH, T, HS}, dt, dims{T * C, HS, C, 1});
    // Scores {B, NH, T, T}: f32, in the compute dtype, and transposed.
    scores_md_ = memory::desc(dims{B, NH, T, T}, f32, Tag::abcd);
    const memory::desc probs(dims{B, NH, T, T}, dt, Tag::abcd);
    const memory::desc probs_t(dims{B, NH, T, T}, dt, dims{NH * T * T, T * T, 1, T});
    const float scale = 1.0f / std::sqrt(float(HS));
    head_md_ = head;
    out_md_ = out;
    probs_md_ = probs;
    probs_t_md_ = probs_t;
    head_t_md_ = head_t;
    qk_ = make_matmul(head, head_t, scores_md_, scale);  // scores = scale q k^T
    av_ = make_matmul(probs, head, out);                 // out = att v
    datt_ = make_matmul(out, head_t, scores_md_);        // datt = dout v^T
    dv_ = make_matmul(probs_t, out, head);               // dv = att^T dout
    dq_ = make_matmul(probs, head, head, scale);         // dq = scale dpre k
    dk_ = make_matmul(probs_t, head, head, scale);       // dk = scale dpre^T q
    // Softmax over the last axis of the f32 scores, in place.
    const memory::desc rows(dims{B * NH * T, T}, f32, Tag::ab);
    COHORT_DNNL({
      const dnnl::softmax_forward::primitive_desc fwd_pd(
          dnnl::softmax_forward::desc(dnnl::prop_kind::forward_training, rows, 1), engine());
      softmax_ = dnnl::softmax_forward(fwd_pd);
      softmax_bwd_ = dnnl::softmax_backward(dnnl::softmax_backward::primitive_desc(
          dnnl::softmax_backward::desc(rows, rows, 1), engine(), fwd_pd));
    });
    rows_md_ = rows;
    const size_t n = size_t(B * NH * T * T);
    att_.resize(n);
    dscores_.resize(n);
    if (s.dtype != DType::kF32) {
      att_low_.resize(n);
      dscores_low_.resize(n);
    }
  }

  void forward(ConstView qkv, View out) override {
    check_operands("attention forward", s_.dtype, {{"qkv", qkv}, {"out", out}});
    const int64_t C = s_.c;
    run(qk_, {{DNNL_ARG_SRC, mem(head_md_, at(qkv, 0))},
              {DNNL_ARG_WEIGHTS, mem(head_t_md_, at(qkv, C))},
              {DNNL_ARG_DST, mem(scores_md_, att_.data())}});
    mask_upper(att_.data());
    run(softmax_, {{DNNL_ARG_SRC, mem(rows_md_, att_.data())},
                   {DNNL_ARG_DST, mem(rows_md_, att_.data())}});
    run(av_, {{DNNL_ARG_SRC, mem(probs_md_, compute_copy(att_, att_low_))},
              {DNNL_ARG_WEIGHTS, mem(head_md_, at(qkv, 2 * C))},
              {DNNL_ARG_DST, mem(out_md_, out.data)}});
  }

  void backward(ConstView qkv, ConstView dout, View dqkv) override {
    check_operands("attention backward", s_.dtype, {{"qkv", qkv}, {"dout", dout}, {"dqkv", dqkv}});
    const int64_t C = s_.c;
    // att in the compute dtype: forward's bf16 copy is still there.
    const void* att = s_.dtype == DType::kF32 ? static_cast<const void*>(att_.data())
                                              : static_cast<const void*>(att_low_.data());
    run(datt_, {{DNNL_ARG_SRC, mem(out_md_, dout.data)},
                {DNNL_ARG_WEIGHTS, mem(head_t_md_, at(qkv, 2 * C))},
                {DNNL_ARG_DST, mem(scores_md_, dscores_.data())}});
    run(dv_, {{DNNL_ARG_SRC, mem(probs_t_md_, att)},
              {DNNL_ARG_WEIGHTS, mem(out_md_, dout.data)},
              {DNNL_ARG_DST, mem(head_md_, at(dqkv, 2 * C))}});
    // dpre = att * (datt - sum(att * datt)), in place; 0 where masked (att = 0).
    run(softmax_bwd_, {{DNNL_ARG_DST, mem(rows_md_, att_.data())},
                       {DNNL_ARG_DIFF_DST, mem(rows_md_, dscores_.data())},
                       {DNNL_ARG_DIFF_SRC, mem(rows_md_, dscores_.data())}});
    const void* dpre = compute_copy(dscores_, dscores_low_);
    run(dq_, {{DNNL_ARG_SRC, mem(probs_md_, dpre)},
              {DNNL_ARG_WEIGHTS, mem(head_md_, at(qkv, C))},
              {DNNL_ARG_DST, mem(head_md_, at(dqkv, 0))}});
    run(dk_, {{DNNL_ARG_SRC, mem(probs_t_md_, dpre)},
              {DNNL_ARG_WEIGHTS, mem(head_md_, at(qkv, 0))},
              {DNNL_ARG_DST, mem(head_md_, at(dqkv, C))}});
  }

 private:
  // The element `offset` of a view of the shape's dtype.
  const void* at(ConstView v, int64_t offset) const {
    return static_cast<const char*>(v.data) + offset * int64_t(dtype_size(s_.dtype));
  }

  // Scores above the diagonal (key after query) become -inf.
  void mask_upper(float* scores) const {
    const int64_t T = s_.t, blocks = s_.b * s_.heads;
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
#pragma omp parallel for if (blocks * T * T > 65536)
    for (int64_t r = 0; r < blocks * T; ++r) {
      float* row = scores + r * T;
      for (int64_t j = r % T + 1; j < T; ++j) row[j] = kNegInf;
    }
  }

  // f32 probabilities (or their gradient) as the matmuls take them: the f32
  // buffer itself, or its bf16 copy, made here.
  const void* compute_copy(const std::vector<float>& f, std::vector<BF16>& low) const {
    if (s_.dtype == DType::kF32) return f.data();
    f32_to_bf16(f.data(), low.data(), low.size());
    return low.data();
  }

  AttentionShape s_;
  memory::desc head_md_, head_t_md_, out_md_, scores_md_, probs_md_, probs_t_md_, rows_md_;
  dnnl::matmul qk_, av_, datt_, dv_, dq_, dk_;
  dnnl::primitive softmax_, softmax_bwd_;
  std::vector<float> att_, dscores_;      // {B, NH, T, T}: probabilities, their gradient
  std::vector<BF16> att_low_, dscores_low_;
};

}  // namespace

std::unique_ptr<Attention> make_attention(Device device, const AttentionShape& shape) {
  COHORT_CHECK(device == Device::kCpu, "attention: only the CPU backend is built");
  cpu::require_compute_dtype("attention", shape.dtype);
  COHORT_CHECK(shape.heads > 0 && shape.c % shape.heads == 0, "attention: ", shape.c,
               " channels do not split into ", shape.heads, " heads");
  return std::make_unique<CpuAttention>(shape);
}

}  // namespace cohort::ops
