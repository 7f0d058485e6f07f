// oneDNN plumbing for the CPU ops: one engine and stream per process, a check
// macro that turns dnnl::error into cohort::Error with file:line, a helper to
// run a reorder (layout change, optionally accumulating), and the dtype
// checks every CPU op makes once per call.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <cstring>
#include <initializer_list>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace cohort::ops::cpu {

using dnnl::memory;
using Tag = dnnl::memory::format_tag;

// oneDNN's element type for a DType (i32 is s32).
memory::data_type dnnl_type(DType t);

// The CPU ops compute in f32 or bf16 (oneDNN's bf16 kernels where the CPU has
// AVX-512, f32 kernels on bf16 storage elsewhere: native_bf16()): an Error
// naming the op and the dtype otherwise.
// f16 has no oneDNN CPU kernel here; --precision fp16 computes in f32.
void require_compute_dtype(const char* op, DType t);

// An Error naming the op and operand unless every present operand is on the
// CPU and of dtype `want` (the dtype the op was built for).
using Operand = std::pair<const char*, ConstView>;
void check_operands(const char* op, DType want, std::initializer_list<Operand> operands);

dnnl::engine& engine();
dnnl::stream& stream();

// A oneDNN memory over a buffer cohort owns (no copy).
inline memory mem(const memory::desc& md, const void* p) {
  return memory(md, engine(), const_cast<void*>(p));
}

// Runs a primitive with its arguments on the process stream (converting bf16
// operands for a primitive built on kernel_md(): bf16_fallback.cpp).
void run(const dnnl::primitive& p, const std::unordered_map<int, memory>& args);

// Whether oneDNN has bf16 kernels on this CPU (2.6: AVX-512 cores only).
// Where it has not, the bf16 ops keep bf16 storage and run f32 kernels: they
// build their primitives on kernel_md(), which turns a bf16 descriptor f32
// there (and is the descriptor itself elsewhere), and run() converts.
bool native_bf16();
memory::desc kernel_md(const memory::desc& md);
// x's values rounded to bf16, kept in f32 (weights for the f32 kernels).
void round_to_bf16_values(float* x, size_t n);
// Tests: build bf16 ops on the f32 kernels even where bf16 ones exist (on),
// or as the CPU allows again (off; ops built meanwhile keep converting).
void force_bf16_fallback(bool on);

// A reorder from one layout to another, built once; `accumulate` adds into dst.
class Reorder {
 public:
  Reorder() = default;
  Reorder(const memory::desc& src, const memory::desc& dst, bool accumulate = false);
  void operator()(void* src, void* dst);
  bool identity() const { return identity_; }

 private:
  memory::desc src_md_, dst_md_;
  dnnl::reorder prim_;
  bool identity_ = true;
};

// The backward of a normalization with f32 scale and shift (batch-norm,
// layer-norm), built once: runs the primitive on the data and the forward's
// statistics, and writes dscale and dshift, or with `accumulate` adds them in
// (oneDNN only writes them: through scratch vectors here).
class NormalizationBackward {
 public:
  NormalizationBackward() = default;
  // data: src, dst and their gradients; stat: mean and variance; c: channels.
  NormalizationBackward(dnnl::primitive prim, const memory::desc& data, const memory::desc& stat,
                        int64_t c);
  // `extra`: further arguments (batch-norm's fused-ReLU workspace).
  void operator()(ConstView src, ConstView ddst, ConstView scale, const float* mean,
                  const float* var, View dsrc, View dscale, View dshift, bool accumulate,
                  std::unordered_map<int, memory> extra = {});

 private:
  dnnl::primitive prim_;
  memory::desc data_md_, stat_md_, vec_md_;
  std::vector<float> dscale_, dshift_, zero_;
};

}  // namespace cohort::ops::cpu

#define COHORT_DNNL(expr)                                                                    \
  do {                                                                                       \
    try {                                                                                    \
      expr;                                                                                  \
    } catch (const dnnl::error& e) {                                                         \
      throw ::cohort::Error(::cohort::detail::concat(__FILE__, ":", __LINE__, ": oneDNN: ", \
                                                     e.what()));                             \
    }                                                                                        \
  } while (0)
