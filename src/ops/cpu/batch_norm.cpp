// Batch-norm on oneDNN over NHWC data. oneDNN computes the biased batch
// variance; the running variance follows PyTorch and uses the unbiased one.
// The data's descriptor takes the shape's dtype; scale, shift and statistics
// are f32 (as oneDNN wants them).
#include "ops/batch_norm.h"

#include <vector>

#include "ops/cpu/dnnl_util.h"

namespace cohort::ops {
namespace {

using namespace cpu;
using Flags = dnnl::normalization_flags;

class CpuBatchNorm final : public BatchNorm {
 public:
  explicit CpuBatchNorm(const BatchNormShape& s) : s_(s) {
    data_md_ = memory::desc({s.n, s.c, s.h, s.w}, dnnl_type(s.dtype), Tag::nhwc);
    vec_md_ = memory::desc({s.c}, dnnl_type(DType::kF32), Tag::x);
    auto flags = Flags::use_scale | Flags::use_shift;
    if (s.relu) flags = flags | Flags::fuse_norm_relu;
    const auto data_k = kernel_md(data_md_);  // f32 where oneDNN has no bf16 kernel here
    COHORT_DNNL({
      dnnl::batch_normalization_forward::desc td(dnnl::prop_kind::forward_training, data_k,
                                                 s.eps, flags);
      train_pd_ = dnnl::batch_normalization_forward::primitive_desc(td, engine());
      train_ = dnnl::batch_normalization_forward(train_pd_);
      dnnl::batch_normalization_forward::desc id(dnnl::prop_kind::forward_inference, data_k,
                                                 s.eps, flags | Flags::use_global_stats);
      infer_ = dnnl::batch_normalization_forward(
          dnnl::batch_normalization_forward::primitive_desc(id, engine()));
      dnnl::batch_normalization_backward::desc bd(dnnl::prop_kind::backward, data_k, data_k,
                                                  s.eps, flags);
      bwd_ = NormalizationBackward(
          dnnl::batch_normalization_backward(
              dnnl::batch_normalization_backward::primitive_desc(bd, engine(), train_pd_)),
          data_md_, vec_md_, s.c);
    });
    // The fused ReLU's mask, written by forward_train and read by backward.
    if (s.relu) workspace_.resize(train_pd_.workspace_desc().get_size());
    mean_.resize(size_t(s.c));
    var_.resize(size_t(s.c));
  }

  void forward_train(ConstView src, ConstView gamma, ConstView beta, View dst,
                     View running_mean_v, View running_var_v) override {
    const char* op = "batch_norm forward_train";
    check_operands(op, DType::kF32,
                   {{"running_mean", running_mean_v}, {"running_var", running_var_v}});
    normalize(op, train_, src, gamma, beta, dst, mean_.data(), var_.data(), true);
    float* running_mean = running_mean_v.as<float>();
    float* running_var = running_var_v.as<float>();
    const float m = s_.momentum;
    const double count = double(s_.n * s_.h * s_.w);
    const float unbias = count > 1 ? float(count / (count - 1)) : 1.0f;
    for (int64_t k = 0; k < s_.c; ++k) {
      running_mean[k] = (1 - m) * running_mean[k] + m * mean_[size_t(k)];
      running_var[k] = (1 - m) * running_var[k] + m * var_[size_t(k)] * unbias;
    }
  }

  void forward_infer(ConstView src, ConstView gamma, ConstView beta, View dst,
                     ConstView running_mean, ConstView running_var) override {
    normalize("batch_norm forward_infer", infer_, src, gamma, beta, dst, running_mean,
              running_var);
  }

  void backward(ConstView src, ConstView ddst, ConstView gamma, View dsrc, View dgamma_v,
                View dbeta_v, bool accumulate) override {
    check("batch_norm backward", {{"src", src}, {"ddst", ddst}, {"dsrc", dsrc}},
          {{"gamma", gamma}, {"dgamma", dgamma_v}, {"dbeta", dbeta_v}});
    // (Without a fused ReLU the workspace is empty and oneDNN reads none.)
    bwd_(src, ddst, gamma, mean_.data(), var_.data(), dsrc, dgamma_v, dbeta_v, accumulate,
         {{DNNL_ARG_WORKSPACE, mem(train_pd_.workspace_desc(), workspace_.data())}});
  }

 private:
  // dst = gamma * (src - mean) / sqrt(var + eps) + beta, by a forward primitive
  // (training: it writes the batch's mean and var; inference: it reads them).
  void normalize(const char* op, const dnnl::primitive& p, ConstView src, ConstView gamma,
                 ConstView beta, View dst, ConstView mean, ConstView var, bool train = false) {
    check(op, {{"src", src}, {"dst", dst}},
          {{"gamma", gamma}, {"beta", beta}, {"mean", mean}, {"var", var}});
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, mem(data_md_, src.data)},
                                            {DNNL_ARG_SCALE, mem(vec_md_, gamma.data)},
                                            {DNNL_ARG_SHIFT, mem(vec_md_, beta.data)},
                                            {DNNL_ARG_DST, mem(data_md_, dst.data)},
                                            {DNNL_ARG_MEAN, mem(vec_md_, mean.data)},
                                            {DNNL_ARG_VARIANCE, mem(vec_md_, var.data)}};
    if (train && s_.relu)
      args[DNNL_ARG_WORKSPACE] = mem(train_pd_.workspace_desc(), workspace_.data());
    run(p, args);
  }

  // Data operands are of the shape's dtype; per-channel vectors are f32.
  void check(const char* op, std::initializer_list<Operand> data,
             std::initializer_list<Operand> vectors) const {
    check_operands(op, s_.dtype, data);
    check_operands(op, DType::kF32, vectors);
  }

  BatchNormShape s_;
  memory::desc data_md_, vec_md_;
  dnnl::batch_normalization_forward::primitive_desc train_pd_;
  dnnl::primitive train_, infer_;
  NormalizationBackward bwd_;
  std::vector<float> mean_, var_;
  std::vector<uint8_t> workspace_;
};

}  // namespace

std::unique_ptr<BatchNorm> make_batch_norm(Device device, const BatchNormShape& shape) {
  COHORT_CHECK(device == Device::kCpu, "batch_norm: only the CPU backend is built");
  cpu::require_compute_dtype("batch_norm", shape.dtype);
  return std::make_unique<CpuBatchNorm>(shape);
}

}  // namespace cohort::ops
