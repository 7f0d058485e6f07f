// Elementwise ops as plain OpenMP loops: memory-bound, so one pass each. Each
// checks its operands' dtype once per call; f32 or bf16 storage, f32 math.
#include "ops/elementwise.h"

#include <immintrin.h>

#include <cpuid.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/typed.h"

namespace cohort::ops {

using cpu::check_operands;
constexpr DType kF32 = DType::kF32;
using cpu::dispatch_float;
using cpu::load;
using cpu::store;

void relu_forward(ConstView src_v, View dst_v, int64_t n) {
  dispatch_float("relu forward", src_v.dtype, [&](auto t) {
    using T = decltype(t);
    check_operands("relu forward", src_v.dtype, {{"src", src_v}, {"dst", dst_v}});
    const T* src = src_v.as<T>();
    T* dst = dst_v.as<T>();
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) store(dst, i, std::max(load(src, i), 0.0f));
  });
}

void relu_backward(ConstView ddst_v, ConstView dst_v, View dsrc_v, int64_t n) {
  dispatch_float("relu backward", ddst_v.dtype, [&](auto t) {
    using T = decltype(t);
    check_operands("relu backward", ddst_v.dtype,
                   {{"ddst", ddst_v}, {"dst", dst_v}, {"dsrc", dsrc_v}});
    const T* ddst = ddst_v.as<T>();
    const T* dst = dst_v.as<T>();
    T* dsrc = dsrc_v.as<T>();
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {
      const float g = load(ddst, i);  // loaded unconditionally so the loop is a vector blend
      store(dsrc, i, load(dst, i) > 0.0f ? g : 0.0f);
    }
  });
}

// GELU runs oneDNN's jit eltwise_gelu_tanh (vectorized tanh; bf16 loaded and
// stored, f32 math): a plain loop's std::tanh does not vectorize without
// -ffast-math. One forward and one backward primitive per (n, dtype), cached.
namespace {

struct GeluPrims {
  cpu::memory::desc md;
  dnnl::primitive fwd, bwd;
};

GeluPrims& gelu_prims(DType dtype, int64_t n) {
  static std::mutex mu;
  static std::map<std::pair<int64_t, int>, GeluPrims> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto [it, fresh] = cache.try_emplace({n, int(dtype)});
  GeluPrims& p = it->second;
  if (!fresh) return p;
  p.md = cpu::memory::desc({n}, cpu::dnnl_type(dtype), cpu::Tag::a);
  try {
    COHORT_DNNL({
      const auto alg = dnnl::algorithm::eltwise_gelu_tanh;
      const auto k = cpu::kernel_md(p.md);  // f32 where oneDNN has no bf16 kernel here
      const dnnl::eltwise_forward::primitive_desc fwd_pd(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, alg, k), cpu::engine());
      p.fwd = dnnl::eltwise_forward(fwd_pd);
      p.bwd = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(
          dnnl::eltwise_backward::desc(alg, k, k), cpu::engine(), fwd_pd));
    });
  } catch (...) {
    cache.erase(it);
    throw;
  }
  return p;
}

}  // namespace

void gelu_forward(ConstView src, View dst, int64_t n) {
  cpu::require_compute_dtype("gelu forward", src.dtype);
  check_operands("gelu forward", src.dtype, {{"src", src}, {"dst", dst}});
  if (n == 0) return;
  GeluPrims& p = gelu_prims(src.dtype, n);
  cpu::run(p.fwd, {{DNNL_ARG_SRC, cpu::mem(p.md, src.data)}, {DNNL_ARG_DST, cpu::mem(p.md, dst.data)}});
}

void gelu_backward(ConstView ddst, ConstView src, View dsrc, int64_t n) {
  cpu::require_compute_dtype("gelu backward", ddst.dtype);
  check_operands("gelu backward", ddst.dtype, {{"ddst", ddst}, {"src", src}, {"dsrc", dsrc}});
  if (n == 0) return;
  GeluPrims& p = gelu_prims(ddst.dtype, n);
  cpu::run(p.bwd, {{DNNL_ARG_SRC, cpu::mem(p.md, src.data)},
                   {DNNL_ARG_DIFF_DST, cpu::mem(p.md, ddst.data)},
                   {DNNL_ARG_DIFF_SRC, cpu::mem(p.md, dsrc.data)}});
}

void add(ConstView a_v, ConstView b_v, View dst_v, int64_t n) {
  dispatch_float("add", a_v.dtype, [&](auto t) {
    using T = decltype(t);
    check_operands("add", a_v.dtype, {{"a", a_v}, {"b", b_v}, {"dst", dst_v}});
    const T* a = a_v.as<T>();
    const T* b = b_v.as<T>();
    T* dst = dst_v.as<T>();
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) store(dst, i, load(a, i) + load(b, i));
  });
}

void add_inplace(View dst_v, ConstView src_v, int64_t n) {
  add(dst_v, src_v, dst_v, n);
}

// The mask is f32 (0 or 1/(1-p)) whatever the data's dtype.
void dropout_mask(View mask_v, int64_t n, float p, Rng& rng) {
  check_operands("dropout", kF32, {{"mask", mask_v}});
  float* mask = mask_v.as<float>();
  const float keep = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; ++i) mask[i] = rng.uniform() < p ? 0.0f : keep;
}

void dropout_apply(ConstView src_v, ConstView mask_v, View dst_v, int64_t n) {
  dispatch_float("dropout", src_v.dtype, [&](auto t) {
    using T = decltype(t);
    check_operands("dropout", src_v.dtype, {{"src", src_v}, {"dst", dst_v}});
    check_operands("dropout", kF32, {{"mask", mask_v}});
    const T* src = src_v.as<T>();
    const float* mask = mask_v.as<float>();
    T* dst = dst_v.as<T>();
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) store(dst, i, load(src, i) * mask[i]);
  });
}

void dropout2d_apply(ConstView src_v, ConstView mask_v, View dst_v, int64_t n, int64_t hw,
                     int64_t c) {
  dispatch_float("dropout2d", src_v.dtype, [&](auto t) {
    using T = decltype(t);
    check_operands("dropout2d", src_v.dtype, {{"src", src_v}, {"dst", dst_v}});
    check_operands("dropout2d", kF32, {{"mask", mask_v}});
    const T* src = src_v.as<T>();
    const float* mask = mask_v.as<float>();
    T* dst = dst_v.as<T>();
#pragma omp parallel for if (n * hw * c > 65536)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < hw; ++p) {
        const int64_t off = (i * hw + p) * c;
#pragma omp simd
        for (int64_t k = 0; k < c; ++k) store(dst, off + k, load(src, off + k) * mask[i * c + k]);
      }
  });
}

// Transposes go through oneDNN's jit reorder (a plain loop with a strided
// store was 15% of an mnist-small step), one primitive per shape and dtype.
// A reorder only moves elements, so every dtype is served.
static void transpose(ConstView src, View dst, int64_t n, int64_t c, int64_t h, int64_t w,
                      bool to_nchw) {
  const char* op = to_nchw ? "nhwc_to_nchw" : "nchw_to_nhwc";
  check_operands(op, src.dtype, {{"src", src}, {"dst", dst}});
  static std::mutex mu;
  static std::map<std::array<int64_t, 6>, cpu::Reorder> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& r = cache[{n, c, h, w, to_nchw, int64_t(src.dtype)}];
  if (r.identity()) {
    cpu::memory::desc nhwc({n, c, h, w}, cpu::dnnl_type(src.dtype), cpu::Tag::nhwc);
    cpu::memory::desc nchw({n, c, h, w}, cpu::dnnl_type(src.dtype), cpu::Tag::nchw);
    r = to_nchw ? cpu::Reorder(nhwc, nchw) : cpu::Reorder(nchw, nhwc);
  }
  r(const_cast<void*>(src.data), dst.data);
}

namespace {

// f32 -> f16 -> f32 over one contiguous range, 16 (AVX-512) or 8 (F16C) at a
// time; built for those units whatever -march says and picked at run time.
// The conversions round by the immediate (nearest even), not by MXCSR, and
// make and read fp16 subnormals whatever FTZ/DAZ say of f32.
__attribute__((target("avx512f"))) void round_f16_avx512(float* x, int64_t n) {
  // The zero-masking forms: the same instructions, and GCC 12 warns of the
  // unmasked ones' undefined pass-through register.
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m256i h = _mm512_maskz_cvtps_ph(m, _mm512_maskz_loadu_ps(m, x + i), kRound);
    _mm512_mask_storeu_ps(x + i, m, _mm512_maskz_cvtph_ps(m, h));
  }
}

__attribute__((target("avx,f16c"))) void round_f16_f16c(float* x, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), kRound)));
  for (; i < n; ++i) x[i] = from_f16(to_f16(x[i]));
}

void round_f16_scalar(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = from_f16(to_f16(x[i]));
}

using RoundKernel = void (*)(float*, int64_t);

RoundKernel pick_round_f16() {
  if (__builtin_cpu_supports("avx512f")) return round_f16_avx512;
  // F16C is CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports knows no "f16c").
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
  if (f16c && __builtin_cpu_supports("avx")) return round_f16_f16c;
  return round_f16_scalar;
}

}  // namespace

void round_to_f16(View x_v, int64_t n) {
  check_operands("round_to_f16", kF32, {{"x", x_v}});
  static const RoundKernel kernel = pick_round_f16();
  float* x = x_v.as<float>();
  constexpr int64_t kChunk = 1 << 14;  // 64 KiB of f32 a task
#pragma omp parallel for if (n > 65536)
  for (int64_t b = 0; b < n; b += kChunk) kernel(x + b, std::min(kChunk, n - b));
}

void nhwc_to_nchw(ConstView src, View dst, int64_t n, int64_t h, int64_t w, int64_t c) {
  transpose(src, dst, n, c, h, w, true);
}

void nchw_to_nhwc(ConstView src, View dst, int64_t n, int64_t c, int64_t h, int64_t w) {
  transpose(src, dst, n, c, h, w, false);
}

}  // namespace cohort::ops
