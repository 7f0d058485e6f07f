// Batch-norm on oneDNN over NHWC data. oneDNN computes the biased batch
// variance; the running variance follows PyTorch and uses the unbiased one.
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
    data_md_ = memory::desc({s.n, s.c, s.h, s.w}, kF32, Tag::nhwc);
    vec_md_ = memory::desc({s.c}, kF32, Tag::x);
    auto flags = Flags::use_scale | Flags::use_shift;
    COHORT_DNNL({
      dnnl::batch_normalization_forward::desc td(dnnl::prop_kind::forward_training, data_md_,
                                                 s.eps, flags);
      train_pd_ = dnnl::batch_normalization_forward::primitive_desc(td, engine());
      train_ = dnnl::batch_normalization_forward(train_pd_);
      dnnl::batch_normalization_forward::desc id(dnnl::prop_kind::forward_inference, data_md_,
                                                 s.eps, flags | Flags::use_global_stats);
      infer_ = dnnl::batch_normalization_forward(
          dnnl::batch_normalization_forward::primitive_desc(id, engine()));
      dnnl::batch_normalization_backward::desc bd(dnnl::prop_kind::backward, data_md_, data_md_,
                                                  s.eps, flags);
      bwd_ = dnnl::batch_normalization_backward(
          dnnl::batch_normalization_backward::primitive_desc(bd, engine(), train_pd_));
    });
    mean_.resize(size_t(s.c));
    var_.resize(size_t(s.c));
    dgamma_.resize(size_t(s.c));
    dbeta_.resize(size_t(s.c));
    zero_.assign(size_t(s.c), 0.0f);
  }

  void forward_train(const float* src, const float* gamma, const float* beta, float* dst,
                     float* running_mean, float* running_var) override {
    run(train_, {{DNNL_ARG_SRC, mem(data_md_, src)},
                 {DNNL_ARG_SCALE, mem(vec_md_, gamma)},
                 {DNNL_ARG_SHIFT, mem(vec_md_, beta)},
                 {DNNL_ARG_DST, mem(data_md_, dst)},
                 {DNNL_ARG_MEAN, mem(vec_md_, mean_.data())},
                 {DNNL_ARG_VARIANCE, mem(vec_md_, var_.data())}});
    const float m = s_.momentum;
    const double count = double(s_.n * s_.h * s_.w);
    const float unbias = count > 1 ? float(count / (count - 1)) : 1.0f;
    for (int64_t k = 0; k < s_.c; ++k) {
      running_mean[k] = (1 - m) * running_mean[k] + m * mean_[size_t(k)];
      running_var[k] = (1 - m) * running_var[k] + m * var_[size_t(k)] * unbias;
    }
  }

  void forward_infer(const float* src, const float* gamma, const float* beta, float* dst,
                     const float* running_mean, const float* running_var) override {
    run(infer_, {{DNNL_ARG_SRC, mem(data_md_, src)},
                 {DNNL_ARG_SCALE, mem(vec_md_, gamma)},
                 {DNNL_ARG_SHIFT, mem(vec_md_, beta)},
                 {DNNL_ARG_DST, mem(data_md_, dst)},
                 {DNNL_ARG_MEAN, mem(vec_md_, running_mean)},
                 {DNNL_ARG_VARIANCE, mem(vec_md_, running_var)}});
  }

  void backward(const float* src, const float* ddst, const float* gamma, float* dsrc,
                float* dgamma, float* dbeta, bool accumulate) override {
    float* dg = accumulate ? dgamma_.data() : dgamma;
    float* db = accumulate ? dbeta_.data() : dbeta;
    run(bwd_, {{DNNL_ARG_SRC, mem(data_md_, src)},
               {DNNL_ARG_DIFF_DST, mem(data_md_, ddst)},
               {DNNL_ARG_SCALE, mem(vec_md_, gamma)},
               // oneDNN 2.6 wants the shift at backward although the math does not use it.
               {DNNL_ARG_SHIFT, mem(vec_md_, zero_.data())},
               {DNNL_ARG_MEAN, mem(vec_md_, mean_.data())},
               {DNNL_ARG_VARIANCE, mem(vec_md_, var_.data())},
               {DNNL_ARG_DIFF_SRC, mem(data_md_, dsrc)},
               {DNNL_ARG_DIFF_SCALE, mem(vec_md_, dg)},
               {DNNL_ARG_DIFF_SHIFT, mem(vec_md_, db)}});
    if (!accumulate) return;
    for (int64_t k = 0; k < s_.c; ++k) {
      dgamma[k] += dgamma_[size_t(k)];
      dbeta[k] += dbeta_[size_t(k)];
    }
  }

 private:
  BatchNormShape s_;
  memory::desc data_md_, vec_md_;
  dnnl::batch_normalization_forward::primitive_desc train_pd_;
  dnnl::primitive train_, infer_, bwd_;
  std::vector<float> mean_, var_, dgamma_, dbeta_, zero_;
};

}  // namespace

std::unique_ptr<BatchNorm> make_batch_norm(Device device, const BatchNormShape& shape) {
  COHORT_CHECK(device == Device::kCpu, "batch_norm: only the CPU backend is built");
  return std::make_unique<CpuBatchNorm>(shape);
}

}  // namespace cohort::ops
