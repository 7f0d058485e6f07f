// Conv2d on oneDNN. Activations stay NHWC from layer to layer (no per-call
// reorder of src/dst, unlike PyTorch's NCHW path); only the weights are
// reordered into the primitive's preferred blocked layout, once per step, and
// ReLU is fused as a post-op. Gradients of the weights are reordered back to
// OIHW straight into the gradient arena (with a sum post-op when accumulating).
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
    memory::dims src_d = {s.n, s.c_in, s.h, s.w};
    memory::dims w_d = {s.c_out, s.c_in, s.kh, s.kw};
    memory::dims dst_d = {s.n, s.c_out, s.out_h(), s.out_w()};
    memory::dims strides = {s.stride, s.stride}, pad = {s.pad, s.pad};
    src_md_ = memory::desc(src_d, kF32, Tag::nhwc);
    dst_md_ = memory::desc(dst_d, kF32, Tag::nhwc);
    user_w_md_ = memory::desc(w_d, kF32, Tag::oihw);
    bias_md_ = memory::desc({s.c_out}, kF32, Tag::x);
    auto w_any = memory::desc(w_d, kF32, Tag::any);

    COHORT_DNNL({
      dnnl::convolution_forward::desc fd(prop_kind::forward_training, algorithm::convolution_direct,
                                         src_md_, w_any, bias_md_, dst_md_, strides, pad, pad);
      dnnl::primitive_attr attr;
      if (relu) {
        dnnl::post_ops po;
        po.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
        attr.set_post_ops(po);
      }
      fwd_pd_ = dnnl::convolution_forward::primitive_desc(fd, attr, engine());
      fwd_ = dnnl::convolution_forward(fwd_pd_);
      // Same op without bias for bias-free convs (ResNet): bias memory is zero-size.
      dnnl::convolution_backward_data::desc bd(algorithm::convolution_direct, src_md_, w_any,
                                               dst_md_, strides, pad, pad);
      bwd_data_pd_ = dnnl::convolution_backward_data::primitive_desc(bd, engine(), fwd_pd_);
      bwd_data_ = dnnl::convolution_backward_data(bwd_data_pd_);
      dnnl::convolution_backward_weights::desc wd(algorithm::convolution_direct, src_md_, w_any,
                                                  bias_md_, dst_md_, strides, pad, pad);
      bwd_w_pd_ = dnnl::convolution_backward_weights::primitive_desc(wd, engine(), fwd_pd_);
      bwd_weights_ = dnnl::convolution_backward_weights(bwd_w_pd_);
    });
    fwd_w_reorder_ = Reorder(user_w_md_, fwd_pd_.weights_desc());
    bwd_w_reorder_ = Reorder(user_w_md_, bwd_data_pd_.weights_desc());
    dw_store_ = Reorder(bwd_w_pd_.diff_weights_desc(), user_w_md_);
    dw_accumulate_ = Reorder(bwd_w_pd_.diff_weights_desc(), user_w_md_, true);
    share_fwd_w_ = !fwd_w_reorder_.identity() &&
                   bwd_data_pd_.weights_desc() == fwd_pd_.weights_desc();
    fwd_w_.resize(fwd_pd_.weights_desc().get_size() / 4);
    bwd_w_.resize(bwd_data_pd_.weights_desc().get_size() / 4);
    dw_.resize(bwd_w_pd_.diff_weights_desc().get_size() / 4);
    zero_bias_.assign(size_t(s.c_out), 0.0f);
    db_.resize(size_t(s.c_out));
  }

  void forward(const float* src, const float* weight, const float* bias, float* dst) override {
    void* w = prepared(fwd_w_reorder_, weight, fwd_w_);
    if (!weight && fwd_w_reorder_.identity()) w = const_cast<float*>(last_fwd_weight_);
    if (weight) last_fwd_weight_ = weight;
    run(fwd_, {{DNNL_ARG_SRC, mem(src_md_, src)},
               {DNNL_ARG_WEIGHTS, mem(fwd_pd_.weights_desc(), w)},
               {DNNL_ARG_BIAS, mem(bias_md_, bias ? bias : zero_bias_.data())},
               {DNNL_ARG_DST, mem(dst_md_, dst)}});
  }

  void backward_data(const float* ddst, const float* weight, float* dsrc) override {
    // Forward already reordered these weights when both want the same layout.
    void* w = share_fwd_w_ ? fwd_w_.data() : prepared(bwd_w_reorder_, weight, bwd_w_);
    if (!weight && bwd_w_reorder_.identity()) w = const_cast<float*>(last_bwd_weight_);
    if (weight) last_bwd_weight_ = weight;
    run(bwd_data_, {{DNNL_ARG_DIFF_DST, mem(dst_md_, ddst)},
                    {DNNL_ARG_WEIGHTS, mem(bwd_data_pd_.weights_desc(), w)},
                    {DNNL_ARG_DIFF_SRC, mem(src_md_, dsrc)}});
  }

  void backward_weights(const float* src, const float* ddst, float* dweight, float* dbias,
                        bool accumulate) override {
    bool direct = dw_store_.identity() && !accumulate;
    float* dw = direct ? dweight : dw_.data();
    float* db = (dbias && !accumulate) ? dbias : db_.data();
    run(bwd_weights_, {{DNNL_ARG_SRC, mem(src_md_, src)},
                 {DNNL_ARG_DIFF_DST, mem(dst_md_, ddst)},
                 {DNNL_ARG_DIFF_WEIGHTS, mem(bwd_w_pd_.diff_weights_desc(), dw)},
                 {DNNL_ARG_DIFF_BIAS, mem(bias_md_, db)}});
    if (!direct) (accumulate ? dw_accumulate_ : dw_store_)(dw, dweight);
    if (dbias && accumulate)
      for (int64_t i = 0; i < s_.c_out; ++i) dbias[i] += db_[size_t(i)];
  }

 private:
  // The weights in the layout a primitive wants: the user's buffer if it already is.
  static void* prepared(Reorder& r, const float* weight, std::vector<float>& buf) {
    if (r.identity()) return const_cast<float*>(weight);
    if (weight) r(const_cast<float*>(weight), buf.data());
    return buf.data();
  }

  ConvShape s_;
  memory::desc src_md_, dst_md_, user_w_md_, bias_md_;
  dnnl::convolution_forward::primitive_desc fwd_pd_;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd_;
  dnnl::convolution_backward_weights::primitive_desc bwd_w_pd_;
  dnnl::primitive fwd_, bwd_data_, bwd_weights_;
  Reorder fwd_w_reorder_, bwd_w_reorder_, dw_store_, dw_accumulate_;
  bool share_fwd_w_ = false;
  const float* last_fwd_weight_ = nullptr;
  const float* last_bwd_weight_ = nullptr;
  std::vector<float> fwd_w_, bwd_w_, dw_, zero_bias_, db_;
};

}  // namespace

std::unique_ptr<Conv2d> make_conv2d(Device device, const ConvShape& shape, bool relu) {
  COHORT_CHECK(device == Device::kCpu, "conv2d: only the CPU backend is built");
  return std::make_unique<CpuConv2d>(shape, relu);
}

}  // namespace cohort::ops
