// Max-pool on oneDNN (NHWC in, NHWC out, argmax kept in the primitive's
// workspace for backward) and plain global and adaptive average pools.
#include "ops/pool.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/typed.h"

namespace cohort::ops {
namespace {

using namespace cpu;

class CpuMaxPool2d final : public MaxPool2d {
 public:
  explicit CpuMaxPool2d(const PoolShape& s) : dtype_(s.dtype) {
    src_md_ = memory::desc({s.n, s.c, s.h, s.w}, dnnl_type(s.dtype), Tag::nhwc);
    dst_md_ = memory::desc({s.n, s.c, s.out_h(), s.out_w()}, dnnl_type(s.dtype), Tag::nhwc);
    memory::dims k = {s.k, s.k}, st = {s.stride, s.stride}, pad = {s.pad, s.pad};
    const auto src_k = kernel_md(src_md_), dst_k = kernel_md(dst_md_);  // f32 without bf16 kernels
    COHORT_DNNL({
      dnnl::pooling_forward::desc fd(dnnl::prop_kind::forward_training,
                                     dnnl::algorithm::pooling_max, src_k, dst_k, st, k, pad, pad);
      fwd_pd_ = dnnl::pooling_forward::primitive_desc(fd, engine());
      fwd_ = dnnl::pooling_forward(fwd_pd_);
      dnnl::pooling_backward::desc bd(dnnl::algorithm::pooling_max, src_k, dst_k, st, k, pad, pad);
      bwd_ = dnnl::pooling_backward(
          dnnl::pooling_backward::primitive_desc(bd, engine(), fwd_pd_));
      workspace_ = memory(fwd_pd_.workspace_desc(), engine());
    });
  }

  void forward(ConstView src, View dst) override {
    forward(src, dst, workspace_.get_data_handle());
  }
  void backward(ConstView ddst, View dsrc) override {
    backward(ddst, dsrc, workspace_.get_data_handle());
  }
  size_t workspace_bytes() const override { return fwd_pd_.workspace_desc().get_size(); }

  void forward(ConstView src, View dst, void* ws) override {
    check_operands("max_pool2d forward", dtype_, {{"src", src}, {"dst", dst}});
    run(fwd_, {{DNNL_ARG_SRC, mem(src_md_, src.data)},
               {DNNL_ARG_DST, mem(dst_md_, dst.data)},
               {DNNL_ARG_WORKSPACE, mem(fwd_pd_.workspace_desc(), ws)}});
  }

  void backward(ConstView ddst, View dsrc, const void* ws) override {
    check_operands("max_pool2d backward", dtype_, {{"ddst", ddst}, {"dsrc", dsrc}});
    run(bwd_, {{DNNL_ARG_DIFF_DST, mem(dst_md_, ddst.data)},
               {DNNL_ARG_DIFF_SRC, mem(src_md_, dsrc.data)},
               {DNNL_ARG_WORKSPACE, mem(fwd_pd_.workspace_desc(), ws)}});
  }

 private:
  DType dtype_;
  memory::desc src_md_, dst_md_;
  dnnl::pooling_forward::primitive_desc fwd_pd_;
  dnnl::primitive fwd_, bwd_;
  memory workspace_;
};

}  // namespace

std::unique_ptr<MaxPool2d> make_max_pool2d(Device device, const PoolShape& shape) {
  COHORT_CHECK(device == Device::kCpu, "max_pool2d: only the CPU backend is built");
  cpu::require_compute_dtype("max_pool2d", shape.dtype);
  return std::make_unique<CpuMaxPool2d>(shape);
}

void global_avg_pool_forward(ConstView src_v, View dst_v, int64_t n, int64_t hw, int64_t c) {
  cpu::dispatch_float("global_avg_pool forward", src_v.dtype, [&](auto t) {
    using T = decltype(t);
    cpu::check_operands("global_avg_pool forward", src_v.dtype, {{"src", src_v}, {"dst", dst_v}});
    const T* src = src_v.as<T>();
    T* dst = dst_v.as<T>();
    const float scale = 1.0f / float(hw);
#pragma omp parallel
    {
      std::vector<float> acc(static_cast<size_t>(c));
#pragma omp for
      for (int64_t i = 0; i < n; ++i) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t p = 0; p < hw; ++p) {
          const T* s = src + (i * hw + p) * c;
#pragma omp simd
          for (int64_t k = 0; k < c; ++k) acc[size_t(k)] += cpu::load(s, k);
        }
        for (int64_t k = 0; k < c; ++k) cpu::store(dst + i * c, k, acc[size_t(k)] * scale);
      }
    }
  });
}

void global_avg_pool_backward(ConstView ddst_v, View dsrc_v, int64_t n, int64_t hw, int64_t c) {
  cpu::dispatch_float("global_avg_pool backward", ddst_v.dtype, [&](auto t) {
    using T = decltype(t);
    cpu::check_operands("global_avg_pool backward", ddst_v.dtype,
                        {{"ddst", ddst_v}, {"dsrc", dsrc_v}});
    const T* ddst = ddst_v.as<T>();
    T* dsrc = dsrc_v.as<T>();
    const float scale = 1.0f / float(hw);
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t p = 0; p < hw; ++p) {
        T* d = dsrc + (i * hw + p) * c;
#pragma omp simd
        for (int64_t k = 0; k < c; ++k) cpu::store(d, k, cpu::load(ddst, i * c + k) * scale);
      }
    }
  });
}

namespace {

// PyTorch's bin [floor(i n / out), ceil((i + 1) n / out)) of output cell i.
std::pair<int64_t, int64_t> adaptive_bin(int64_t i, int64_t n, int64_t out) {
  return {i * n / out, ((i + 1) * n + out - 1) / out};
}

}  // namespace

void adaptive_avg_pool_forward(ConstView src_v, View dst_v, const AdaptivePoolShape& s) {
  cpu::dispatch_float("adaptive_avg_pool forward", src_v.dtype, [&](auto t) {
    using T = decltype(t);
    cpu::check_operands("adaptive_avg_pool forward", src_v.dtype, {{"src", src_v}, {"dst", dst_v}});
    const T* src = src_v.as<T>();
    T* dst = dst_v.as<T>();
#pragma omp parallel
    {
      std::vector<float> acc(static_cast<size_t>(s.c));
#pragma omp for collapse(2)
      for (int64_t n = 0; n < s.n; ++n)
        for (int64_t i = 0; i < s.out_h; ++i) {
          const auto [h0, h1] = adaptive_bin(i, s.h, s.out_h);
          for (int64_t j = 0; j < s.out_w; ++j) {
            const auto [w0, w1] = adaptive_bin(j, s.w, s.out_w);
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (int64_t y = h0; y < h1; ++y)
              for (int64_t x = w0; x < w1; ++x) {
                const T* p = src + ((n * s.h + y) * s.w + x) * s.c;
#pragma omp simd
                for (int64_t k = 0; k < s.c; ++k) acc[size_t(k)] += cpu::load(p, k);
              }
            const float scale = 1.0f / float((h1 - h0) * (w1 - w0));
            T* q = dst + ((n * s.out_h + i) * s.out_w + j) * s.c;
            for (int64_t k = 0; k < s.c; ++k) cpu::store(q, k, acc[size_t(k)] * scale);
          }
        }
    }
  });
}

void adaptive_avg_pool_backward(ConstView ddst_v, View dsrc_v, const AdaptivePoolShape& s) {
  cpu::dispatch_float("adaptive_avg_pool backward", ddst_v.dtype, [&](auto t) {
    using T = decltype(t);
    cpu::check_operands("adaptive_avg_pool backward", ddst_v.dtype,
                        {{"ddst", ddst_v}, {"dsrc", dsrc_v}});
    const T* ddst = ddst_v.as<T>();
    T* dsrc = dsrc_v.as<T>();
    const int64_t image = s.h * s.w * s.c;
#pragma omp parallel
    {
      // Bins may overlap: one image's gradient is summed in f32, then stored.
      std::vector<float> acc(static_cast<size_t>(image));
#pragma omp for
      for (int64_t n = 0; n < s.n; ++n) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t i = 0; i < s.out_h; ++i) {
          const auto [h0, h1] = adaptive_bin(i, s.h, s.out_h);
          for (int64_t j = 0; j < s.out_w; ++j) {
            const auto [w0, w1] = adaptive_bin(j, s.w, s.out_w);
            const float scale = 1.0f / float((h1 - h0) * (w1 - w0));
            const T* g = ddst + ((n * s.out_h + i) * s.out_w + j) * s.c;
            for (int64_t y = h0; y < h1; ++y)
              for (int64_t x = w0; x < w1; ++x) {
                float* a = acc.data() + (y * s.w + x) * s.c;
#pragma omp simd
                for (int64_t k = 0; k < s.c; ++k) a[k] += cpu::load(g, k) * scale;
              }
          }
        }
        T* d = dsrc + n * image;
        for (int64_t k = 0; k < image; ++k) cpu::store(d, k, acc[size_t(k)]);
      }
    }
  });
}

}  // namespace cohort::ops
