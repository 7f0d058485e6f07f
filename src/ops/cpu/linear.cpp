// Linear on oneDNN matmul. The weight {O, I} is read in place as a transposed
// {I, O} matrix through strides, so no weight reorder happens at all; ReLU is a
// post-op, and accumulation into the gradient arena is a sum post-op.
// Mixed precision: src/dst and their gradients are of the shape's dtype (f32
// or bf16); weight, bias and their gradients are the f32 master copies. In
// bf16, forward converts the weight to bf16 once (backward_data reuses it:
// forward always precedes it in a step, and a weight at another address, as
// a tied head's next block, is converted again; or, after set_keep_bf16_weights(false),
// converts it again into a scratch the thread's linears share), and dweight
// comes out in f32.
#include "ops/linear.h"

#include <atomic>
#include <vector>

#include "ops/cpu/dnnl_util.h"

namespace cohort::ops {
namespace {

using namespace cpu;

std::atomic<bool> g_keep_bf16_weights{true};

class CpuLinear final : public Linear {
 public:
  CpuLinear(const LinearShape& s, bool relu) : s_(s) {
    const auto dt = dnnl_type(s.dtype), f32 = memory::data_type::f32;
    src_md_ = memory::desc({s.n, s.in}, dt, Tag::ab);
    dst_md_ = memory::desc({s.n, s.out}, dt, Tag::ab);
    w_t_md_ = memory::desc({s.in, s.out}, dt, memory::dims{1, s.in});   // W^T view
    w_md_ = memory::desc({s.out, s.in}, dt, Tag::ab);                    // W
    dw_md_ = memory::desc({s.out, s.in}, f32, Tag::ab);                  // dW, f32 always
    ddst_t_md_ = memory::desc({s.out, s.n}, dt, memory::dims{1, s.out}); // ddst^T view
    bias_md_ = memory::desc({1, s.out}, f32, Tag::ab);
    COHORT_DNNL({
      dnnl::primitive_attr attr;
      if (relu) {
        dnnl::post_ops po;
        po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
        attr.set_post_ops(po);
      }
      fwd_ = dnnl::matmul(dnnl::matmul::primitive_desc(
          dnnl::matmul::desc(kernel_md(src_md_), kernel_md(w_t_md_), bias_md_, kernel_md(dst_md_)),
          attr, engine()));
      // dsrc {N, I} = ddst {N, O} x W {O, I}
      bwd_data_ = dnnl::matmul(
          dnnl::matmul::primitive_desc(dnnl::matmul::desc(kernel_md(dst_md_), kernel_md(w_md_),
                                                          kernel_md(src_md_)),
                                       engine()));
      // dW {O, I} = ddst^T {O, N} x src {N, I}
      bwd_w_ = dnnl::matmul(
          dnnl::matmul::primitive_desc(dnnl::matmul::desc(kernel_md(ddst_t_md_),
                                                          kernel_md(src_md_), dw_md_),
                                       engine()));
      dnnl::primitive_attr sum;
      dnnl::post_ops po;
      po.append_sum(1.0f);
      sum.set_post_ops(po);
      bwd_w_acc_ = dnnl::matmul(dnnl::matmul::primitive_desc(
          dnnl::matmul::desc(kernel_md(ddst_t_md_), kernel_md(src_md_), dw_md_), sum, engine()));
    });
    zero_bias_.assign(size_t(s.out), 0.0f);
  }

  void forward(ConstView src, ConstView weight, ConstView bias, View dst) override {
    check_operands("linear forward", s_.dtype, {{"src", src}, {"dst", dst}});
    check_operands("linear forward", DType::kF32, {{"weight", weight}, {"bias", bias}});
    run(fwd_, {{DNNL_ARG_SRC, mem(src_md_, src.data)},
               {DNNL_ARG_WEIGHTS, mem(w_t_md_, compute_weight(weight, true))},
               {DNNL_ARG_BIAS, mem(bias_md_, bias ? bias.data : zero_bias_.data())},
               {DNNL_ARG_DST, mem(dst_md_, dst.data)}});
  }

  void backward_data(ConstView ddst, ConstView weight, View dsrc) override {
    check_operands("linear backward_data", s_.dtype, {{"ddst", ddst}, {"dsrc", dsrc}});
    check_operands("linear backward_data", DType::kF32, {{"weight", weight}});
    run(bwd_data_, {{DNNL_ARG_SRC, mem(dst_md_, ddst.data)},
                    {DNNL_ARG_WEIGHTS, mem(w_md_, compute_weight(weight, false))},
                    {DNNL_ARG_DST, mem(src_md_, dsrc.data)}});
  }

  void backward_weights(ConstView src_v, ConstView ddst_v, View dweight, View dbias_v,
                        bool accumulate) override {
    check_operands("linear backward_weights", s_.dtype, {{"src", src_v}, {"ddst", ddst_v}});
    check_operands("linear backward_weights", DType::kF32, {{"dweight", dweight}, {"dbias", dbias_v}});
    run(accumulate ? bwd_w_acc_ : bwd_w_, {{DNNL_ARG_SRC, mem(ddst_t_md_, ddst_v.data)},
                                           {DNNL_ARG_WEIGHTS, mem(src_md_, src_v.data)},
                                           {DNNL_ARG_DST, mem(dw_md_, dweight.data)}});
    if (!dbias_v) return;
    if (s_.dtype == DType::kBF16)
      sum_rows(ddst_v.as<BF16>(), dbias_v.as<float>(), accumulate);
    else
      sum_rows(ddst_v.as<float>(), dbias_v.as<float>(), accumulate);
  }

 private:
  // The weight in the compute dtype: the f32 master itself, or its bf16 copy:
  // this layer's own (made by forward, `convert`; backward_data reuses it), or
  // made at every use in a scratch the thread's linears share, as large as the
  // largest weight (set_keep_bf16_weights(false)).
  const void* compute_weight(ConstView weight, bool convert) {
    if (s_.dtype == DType::kF32) return weight.data;
    const size_t n = size_t(s_.out * s_.in);
    if (!g_keep_bf16_weights) {
      std::vector<BF16>().swap(w_low_);
      thread_local std::vector<BF16> shared;
      if (shared.size() < n) shared.resize(n);
      f32_to_bf16(weight.as<float>(), shared.data(), n);
      return shared.data();
    }
    if (w_low_.size() != n || weight.data != w_from_) {  // a tied head's blocks share ops
      w_low_.resize(n);
      w_from_ = weight.data;
      convert = true;
    }
    if (convert) f32_to_bf16(weight.as<float>(), w_low_.data(), n);
    return w_low_.data();
  }

  // dbias (+)= the sum of ddst's rows, in f32.
  template <class T>
  void sum_rows(const T* ddst, float* dbias, bool accumulate) const {
    const int64_t n = s_.n, o = s_.out;
    if (!accumulate)
      for (int64_t j = 0; j < o; ++j) dbias[j] = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      const T* row = ddst + i * o;
#pragma omp simd
      for (int64_t j = 0; j < o; ++j) dbias[j] += to_float(row[j]);
    }
  }
  static float to_float(float v) { return v; }
  static float to_float(BF16 v) { return from_bf16(v); }

  LinearShape s_;
  memory::desc src_md_, dst_md_, w_t_md_, w_md_, dw_md_, ddst_t_md_, bias_md_;
  dnnl::primitive fwd_, bwd_data_, bwd_w_, bwd_w_acc_;
  std::vector<float> zero_bias_;
  std::vector<BF16> w_low_;
  const void* w_from_ = nullptr;  // the weight w_low_ holds
};

}  // namespace

void set_keep_bf16_weights(bool keep) { g_keep_bf16_weights = keep; }

std::unique_ptr<Linear> make_linear(Device device, const LinearShape& shape, bool relu) {
  COHORT_CHECK(device == Device::kCpu, "linear: only the CPU backend is built");
  cpu::require_compute_dtype("linear", shape.dtype);
  return std::make_unique<CpuLinear>(shape, relu);
}

}  // namespace cohort::ops
