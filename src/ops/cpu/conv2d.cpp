// Conv2d on oneDNN. Activations stay NHWC from layer to layer (no per-call
// reorder of src/dst, unlike PyTorch's NCHW path); only the weights are
// reordered into the primitive's preferred blocked layout, once per step, and
// ReLU is fused as a post-op. Gradients of the weights are reordered back to
// OIHW straight into the gradient arena (with a sum post-op when accumulating).
// Mixed precision: src/dst and their gradients are of the shape's dtype (f32
// or bf16); weights, bias and their gradients are always the f32 master
// copies. In bf16 the weight reorder converts to bf16 on the way into the
// blocked layout (no extra pass), and the weight gradient comes out in f32.
#include "ops/conv2d.h"

#include <vector>

#include "ops/cpu/dnnl_util.h"

namespace cohort::ops {
namespace {

using namespace cpu;
using dnnl::algorithm;
using dnnl::prop_kind;

class CpuConv2d final : public Conv2d {
 public:
  CpuConv2d(const ConvShape& s, bool relu) : s_(s) {
    const auto dt = dnnl_type(s.dtype);
    memory::dims src_d = {s.n, s.c_in, s.h, s.w};
    memory::dims w_d = {s.c_out, s.c_in, s.kh, s.kw};
    memory::dims dst_d = {s.n, s.c_out, s.out_h(), s.out_w()};
    memory::dims strides = {s.stride, s.stride}, pad = {s.pad, s.pad};
    src_md_ = memory::desc(src_d, dt, Tag::nhwc);
    dst_md_ = memory::desc(dst_d, dt, Tag::nhwc);
    const auto f32 = memory::data_type::f32;
    user_w_md_ = memory::desc(w_d, f32, Tag::oihw);
    bias_md_ = memory::desc({s.c_out}, f32, Tag::x);
    auto w_any = memory::desc(w_d, dt, Tag::any);
    // The weight gradient in f32 at any precision. A bf16 one (as autocast
    // gives) measured 5% faster on mnist-large, but rounding each call's sum
    // to bf16 makes a batch split into chunks, replicas or ranks round
    // differently from the whole batch: data parallelism then ended 4.5e-2
    // from the single process at bf16 instead of 1.6e-7.
    auto dw_any = memory::desc(w_d, f32, Tag::any);

    // The primitives' descriptors (f32 where oneDNN has no bf16 kernel here).
    const auto src_k = kernel_md(src_md_), dst_k = kernel_md(dst_md_);
    w_any = kernel_md(w_any);
    COHORT_DNNL({
      dnnl::convolution_forward::desc fd(prop_kind::forward_training, algorithm::convolution_direct,
                                         src_k, w_any, bias_md_, dst_k, strides, pad, pad);
      dnnl::primitive_attr attr;
      if (relu) {
        dnnl::post_ops po;
        po.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
        attr.set_post_ops(po);
      }
      fwd_pd_ = dnnl::convolution_forward::primitive_desc(fd, attr, engine());
      fwd_ = dnnl::convolution_forward(fwd_pd_);
      // Same op without bias for bias-free convs (ResNet): bias memory is zero-size.
      dnnl::convolution_backward_data::desc bd(algorithm::convolution_direct, src_k, w_any,
                                               dst_k, strides, pad, pad);
      bwd_data_pd_ = dnnl::convolution_backward_data::primitive_desc(bd, engine(), fwd_pd_);
      bwd_data_ = dnnl::convolution_backward_data(bwd_data_pd_);
      dnnl::convolution_backward_weights::desc wd(algorithm::convolution_direct, src_k, dw_any,
                                                  bias_md_, dst_k, strides, pad, pad);
      bwd_w_pd_ = dnnl::convolution_backward_weights::primitive_desc(wd, engine(), fwd_pd_);
      bwd_weights_ = dnnl::convolution_backward_weights(bwd_w_pd_);
    });
    fwd_w_md_ = fwd_pd_.weights_desc();
    bwd_w_md_ = bwd_data_pd_.weights_desc();
    // bf16 on f32 kernels (bf16_fallback.cpp): the weights are reordered in
    // f32 and rounded to bf16 values, as the native kernels read them (else
    // ZeRO-1/2's widened bf16 copies and dp's f32 masters convolve apart).
    round_ = s.dtype == DType::kBF16 && fwd_w_md_.data_type() == memory::data_type::f32;
    fwd_w_reorder_ = Reorder(user_w_md_, fwd_w_md_);
    bwd_w_reorder_ = Reorder(user_w_md_, bwd_w_md_);
    dw_store_ = Reorder(bwd_w_pd_.diff_weights_desc(), user_w_md_);
    dw_accumulate_ = Reorder(bwd_w_pd_.diff_weights_desc(), user_w_md_, true);
    share_fwd_w_ = (round_ || !fwd_w_reorder_.identity()) && bwd_w_md_ == fwd_w_md_;
    // Scratch sized from the descriptors' bytes (bf16 weights take half).
    fwd_w_.resize(floats(fwd_w_md_));
    bwd_w_.resize(floats(bwd_w_md_));
    dw_.resize(floats(bwd_w_pd_.diff_weights_desc()));
    zero_bias_.assign(size_t(s.c_out), 0.0f);
    db_.resize(size_t(s.c_out));
  }

  void forward(ConstView src, ConstView weight, ConstView bias, View dst) override {
    check_operands("conv2d forward", s_.dtype, {{"src", src}, {"dst", dst}});
    check_operands("conv2d forward", DType::kF32, {{"weight", weight}, {"bias", bias}});
    const void* w = prepared(fwd_w_reorder_, weight.data, fwd_w_);
    if (!weight && fwd_w_reorder_.identity() && !round_) w = last_fwd_weight_;
    if (weight) last_fwd_weight_ = weight.data;
    run(fwd_, {{DNNL_ARG_SRC, mem(src_md_, src.data)},
               {DNNL_ARG_WEIGHTS, mem(fwd_w_md_, w)},
               {DNNL_ARG_BIAS, mem(bias_md_, bias ? bias.data : zero_bias_.data())},
               {DNNL_ARG_DST, mem(dst_md_, dst.data)}});
  }

  void backward_data(ConstView ddst, ConstView weight, View dsrc) override {
    check_operands("conv2d backward_data", s_.dtype, {{"ddst", ddst}, {"dsrc", dsrc}});
    check_operands("conv2d backward_data", DType::kF32, {{"weight", weight}});
    // Forward already reordered these weights when both want the same layout.
    const void* w = share_fwd_w_ ? fwd_w_.data() : prepared(bwd_w_reorder_, weight.data, bwd_w_);
    if (!weight && bwd_w_reorder_.identity() && !round_) w = last_bwd_weight_;
    if (weight) last_bwd_weight_ = weight.data;
    run(bwd_data_, {{DNNL_ARG_DIFF_DST, mem(dst_md_, ddst.data)},
                    {DNNL_ARG_WEIGHTS, mem(bwd_w_md_, w)},
                    {DNNL_ARG_DIFF_SRC, mem(src_md_, dsrc.data)}});
  }

  void backward_weights(ConstView src, ConstView ddst, View dweight, View dbias,
                        bool accumulate) override {
    check_operands("conv2d backward_weights", s_.dtype, {{"src", src}, {"ddst", ddst}});
    check_operands("conv2d backward_weights", DType::kF32, {{"dweight", dweight}, {"dbias", dbias}});
    bool direct = dw_store_.identity() && !accumulate;
    void* dw = direct ? dweight.data : dw_.data();
    void* db = (dbias && !accumulate) ? dbias.data : db_.data();
    run(bwd_weights_, {{DNNL_ARG_SRC, mem(src_md_, src.data)},
                 {DNNL_ARG_DIFF_DST, mem(dst_md_, ddst.data)},
                 {DNNL_ARG_DIFF_WEIGHTS, mem(bwd_w_pd_.diff_weights_desc(), dw)},
                 {DNNL_ARG_DIFF_BIAS, mem(bias_md_, db)}});
    if (!direct) (accumulate ? dw_accumulate_ : dw_store_)(dw, dweight.data);
    if (dbias && accumulate) {
      float* out = dbias.as<float>();
      for (int64_t i = 0; i < s_.c_out; ++i) out[i] += db_[size_t(i)];
    }
  }

 private:
  static size_t floats(const memory::desc& md) { return (md.get_size() + 3) / sizeof(float); }

  // The weights in the layout a primitive wants: the user's buffer if it
  // already is (and needs no rounding).
  const void* prepared(Reorder& r, const void* weight, std::vector<float>& buf) const {
    if (r.identity() && !round_) return weight;
    if (weight) {
      r(const_cast<void*>(weight), buf.data());
      if (round_) round_to_bf16_values(buf.data(), buf.size());
    }
    return buf.data();
  }

  ConvShape s_;
  memory::desc src_md_, dst_md_, user_w_md_, bias_md_, fwd_w_md_, bwd_w_md_;
  dnnl::convolution_forward::primitive_desc fwd_pd_;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd_;
  dnnl::convolution_backward_weights::primitive_desc bwd_w_pd_;
  dnnl::primitive fwd_, bwd_data_, bwd_weights_;
  Reorder fwd_w_reorder_, bwd_w_reorder_, dw_store_, dw_accumulate_;
  bool share_fwd_w_ = false;
  bool round_ = false;
  const void* last_fwd_weight_ = nullptr;
  const void* last_bwd_weight_ = nullptr;
  std::vector<float> fwd_w_, bwd_w_, dw_, zero_bias_, db_;
};

}  // namespace

std::unique_ptr<Conv2d> make_conv2d(Device device, const ConvShape& shape, bool relu) {
  COHORT_CHECK(device == Device::kCpu, "conv2d: only the CPU backend is built");
  cpu::require_compute_dtype("conv2d", shape.dtype);
  return std::make_unique<CpuConv2d>(shape, relu);
}

}  // namespace cohort::ops
