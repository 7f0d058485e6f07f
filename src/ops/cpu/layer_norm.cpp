// Layer-norm on oneDNN's layer_normalization over {rows, C} row-major data.
// forward_training writes each row's mean and (biased) variance, which
// backward reads. The data's descriptor takes the shape's dtype (bf16 runs
// oneDNN's jit kernel, f32 math); scale, shift and statistics are f32.
#include "ops/layer_norm.h"

#include <vector>

#include "ops/cpu/dnnl_util.h"

namespace cohort::ops {
namespace {

using namespace cpu;
using Flags = dnnl::normalization_flags;

class CpuLayerNorm final : public LayerNorm {
 public:
  explicit CpuLayerNorm(const LayerNormShape& s) : s_(s) {
    data_md_ = memory::desc({s.rows, s.c}, dnnl_type(s.dtype), Tag::ab);
    stat_md_ = memory::desc({s.rows}, memory::data_type::f32, Tag::a);
    vec_md_ = memory::desc({s.c}, memory::data_type::f32, Tag::a);
    const auto flags = Flags::use_scale | Flags::use_shift;
    const auto data_k = kernel_md(data_md_);  // f32 where oneDNN has no bf16 kernel here
    COHORT_DNNL({
      dnnl::layer_normalization_forward::desc fd(dnnl::prop_kind::forward_training, data_k,
                                                 stat_md_, s.eps, flags);
      const dnnl::layer_normalization_forward::primitive_desc fwd_pd(fd, engine());
      fwd_ = dnnl::layer_normalization_forward(fwd_pd);
      dnnl::layer_normalization_backward::desc bd(dnnl::prop_kind::backward, data_k, data_k,
                                                  stat_md_, s.eps, flags);
      bwd_ = NormalizationBackward(
          dnnl::layer_normalization_backward(
              dnnl::layer_normalization_backward::primitive_desc(bd, engine(), fwd_pd)),
          data_md_, stat_md_, s.c);
    });
    mean_.resize(size_t(s.rows));
    var_.resize(size_t(s.rows));
  }

  void forward(ConstView src, ConstView gamma, ConstView beta, View dst) override {
    const char* op = "layer_norm forward";
    check_operands(op, s_.dtype, {{"src", src}, {"dst", dst}});
    check_operands(op, DType::kF32, {{"gamma", gamma}, {"beta", beta}});
    run(fwd_, {{DNNL_ARG_SRC, mem(data_md_, src.data)},
               {DNNL_ARG_SCALE, mem(vec_md_, gamma.data)},
               {DNNL_ARG_SHIFT, mem(vec_md_, beta.data)},
               {DNNL_ARG_DST, mem(data_md_, dst.data)},
               {DNNL_ARG_MEAN, mem(stat_md_, mean_.data())},
               {DNNL_ARG_VARIANCE, mem(stat_md_, var_.data())}});
  }

  void backward(ConstView src, ConstView ddst, ConstView gamma, View dsrc, View dgamma_v,
                View dbeta_v, bool accumulate) override {
    const char* op = "layer_norm backward";
    check_operands(op, s_.dtype, {{"src", src}, {"ddst", ddst}, {"dsrc", dsrc}});
    check_operands(op, DType::kF32, {{"gamma", gamma}, {"dgamma", dgamma_v}, {"dbeta", dbeta_v}});
    bwd_(src, ddst, gamma, mean_.data(), var_.data(), dsrc, dgamma_v, dbeta_v, accumulate);
  }

 private:
  LayerNormShape s_;
  memory::desc data_md_, stat_md_, vec_md_;
  dnnl::primitive fwd_;
  NormalizationBackward bwd_;
  std::vector<float> mean_, var_;
};

}  // namespace

std::unique_ptr<LayerNorm> make_layer_norm(Device device, const LayerNormShape& shape) {
  COHORT_CHECK(device == Device::kCpu, "layer_norm: only the CPU backend is built");
  cpu::require_compute_dtype("layer_norm", shape.dtype);
  return std::make_unique<CpuLayerNorm>(shape);
}

}  // namespace cohort::ops
