// Module: a layer with explicit forward and backward (DESIGN principle 2).
// forward keeps what backward needs; backward runs in reverse and, through
// Context::grad_ready, announces each parameter range of the flat gradient
// arena as soon as it is final, so data parallelism can reduce it while the
// rest of backward runs. Activations are NHWC: {N, H, W, C}.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace cohort::nn {

// A parameter matrix read in row blocks instead of whole: GPT-2's vocabulary
// matrix wte {V, C}, which the embedding reads at its tokens' rows and the
// tied head at every row. ZeRO (parallel/zero_layers.h) streams it so that no
// rank gathers it whole (stage 3) or holds its whole gradient. Every call is
// collective: each rank makes the same calls in the same order (the ids
// differ). Calls after streams() concern the matrix it named.
class RowStream {
 public:
  virtual ~RowStream() = default;
  // Whether the matrix at `weight` (in the parameter arena) streams; layers
  // read others whole.
  virtual bool streams(const float* weight) const = 0;
  // Rows [r0, r1) of the matrix of `cols` columns readable until release();
  // [n0, n1) is the block after it (empty: none), fetched meanwhile.
  virtual void acquire(int64_t cols, int64_t r0, int64_t r1, int64_t n0, int64_t n1) = 0;
  virtual void release(int64_t cols, int64_t r0, int64_t r1) = 0;
  // The gradient of rows [r0, r1) is complete for this micro-batch: reduce it.
  virtual void rows_done(int64_t cols, int64_t r0, int64_t r1) = 0;
  // The rows of this rank's `ids` readable until release_ids(), and their
  // gradient (added to, as the embedding adds) complete: reduce it.
  virtual void acquire_ids(int64_t cols, const int32_t* ids, int64_t n) = 0;
  virtual void release_ids() = 0;
  virtual void ids_done(int64_t cols, const int32_t* ids, int64_t n) = 0;
};

class Module;

// Called around the forward and backward of each module with parameters
// inside a container (Sequential, Residual) that the model's layer hooks
// split: ZeRO stage 3 gathers a large transformer block Linear by Linear
// instead of whole (Model sets Context::leaves while such a layer runs).
class LeafHooks {
 public:
  virtual ~LeafHooks() = default;
  virtual void before_forward(const Module& m) = 0;
  virtual void after_forward(const Module& m) = 0;
  virtual void before_backward(const Module& m) = 0;
  virtual void after_backward(const Module& m) = 0;
};

struct Context {
  bool training = true;
  bool accumulate = false;  // add into the gradient arena instead of overwriting it
  Device device = Device::kCpu;
  Rng* rng = nullptr;       // dropout masks
  // The model's arithmetic (optim/precision.h): f32; bf16 (activations stored
  // and multiplied in bf16, weights and their gradients f32 master copies);
  // f16 (f32 arithmetic, every layer's output and input gradient rounded to
  // fp16: oneDNN has no fp16 kernels on these CPUs).
  DType precision = DType::kF32;
  // Called with [begin, end) element offsets into the gradient arena.
  std::function<void(int64_t, int64_t)> grad_ready;
  // Set by the model while its layer hooks stream a matrix (null: none).
  RowStream* rows = nullptr;
  // Set by the model while a top-level layer its hooks split runs (null: none).
  LeafHooks* leaves = nullptr;
};

// Where modules register their parameters (with gradients) and buffers
// (batch-norm running statistics: saved, not trained).
struct ParamRegistry {
  Arena* params;
  Arena* buffers;
};

// Init rules, applied after the arenas are allocated. kNormal draws from
// normal(0, Param::std) (GPT-2: 0.02) whatever the InitStyle.
enum class Init { kUniformFanIn, kOnes, kZeros, kNormal };
// Whose defaults a model's conv and linear layers start from: PyTorch's
// (weight and bias U(+-1/sqrt(fan_in))) or Keras' (Glorot-uniform weight,
// zero bias), so each zoo model starts as in the framework that defined it.
enum class InitStyle { kTorch, kKeras };

class Module {
 public:
  virtual ~Module() = default;
  virtual std::string type() const = 0;
  // Declares parameters as `prefix + name`; records this module's arena range.
  virtual void register_params(ParamRegistry& reg, const std::string& prefix);
  virtual void init_params(Rng& rng, InitStyle style);
  virtual Shape output_shape(const Shape& in) const = 0;
  // Forward multiply-adds x2 for one image of this input shape ({H, W, C}).
  virtual double flops(const Shape& in) const { return 0; }
  // Elements of the activations this module stores for a batch of shape `in`
  // ({N, ...}): its output; containers sum their children (train/memory_plan.h
  // turns this into bytes, with a measured factor for what backward adds).
  virtual double activation_elems(const Shape& in) const { return double(numel(output_shape(in))); }
  virtual const Tensor& forward(const Tensor& x, Context& ctx) = 0;
  // Returns dx (undefined when !needs_input_grad()); dy is never modified.
  virtual const Tensor& backward(const Tensor& dy, Context& ctx) = 0;
  // The modules with parameters this one runs, in forward order: itself, or
  // for containers their children's.
  virtual void collect_leaves(std::vector<const Module*>& out) const {
    if (num_params()) out.push_back(this);
  }

  // Containers pass it on to the children that receive their input.
  virtual void set_needs_input_grad(bool v) { needs_input_grad_ = v; }
  bool needs_input_grad() const { return needs_input_grad_; }
  // Fine-tuning (Model::freeze): a frozen module trains in eval mode
  // (batch-norm on its running statistics, which stay put; no dropout) and
  // its backward never runs: frozen modules are a prefix of the model, below
  // every trainable one, so backward stops where they begin.
  // Containers freeze their children too.
  virtual void set_frozen(bool v) { frozen_ = v; }
  bool frozen() const { return frozen_; }
  // After a freeze: each frozen batch-norm right after a frozen conv becomes
  // part of that conv (Conv2d::fold); containers look for such pairs inside.
  virtual void fold_frozen_norms() {}
  int64_t param_begin() const { return param_begin_; }
  int64_t param_end() const { return param_end_; }
  int64_t num_params() const { return param_end_ - param_begin_; }
  // This module's range of the buffer arena (batch-norm running statistics).
  int64_t buffer_begin() const { return buffer_begin_; }
  int64_t buffer_end() const { return buffer_end_; }

 protected:
  // A parameter of this module, registered by register_params.
  struct Param {
    std::string name;
    Shape shape;
    Init init;
    int64_t fan_in;
    Tensor* value;
    Tensor* grad;
    float std = 0;  // of Init::kNormal
    // Full name of a parameter registered earlier ("wte.weight"): this one
    // becomes a view of its slot (Arena::tie), takes its values (no init of
    // its own) and adds no range. Registered after its owner, the tie's
    // backward runs first; the owner's must then add into the shared gradient.
    std::string tied_to;
  };
  struct Buffer {
    std::string name;
    Shape shape;
    Init init;
    Tensor* value;
  };
  // Subclasses list their own parameters and buffers here.
  virtual std::vector<Param> params() { return {}; }
  virtual std::vector<Buffer> buffers() { return {}; }

  bool needs_input_grad_ = true;
  bool frozen_ = false;
  int64_t param_begin_ = 0, param_end_ = 0;
  int64_t buffer_begin_ = 0, buffer_end_ = 0;
};

// The dtype activations are stored in at a precision: bf16 for bf16, else f32
// (fp16 is emulated on the CPU: f32 storage rounded to fp16 values).
DType activation_dtype(DType precision);

// Makes `t` a tensor of `shape` and `dtype`, reusing its memory when it fits.
void ensure(Tensor& t, const Shape& shape, DType dtype = DType::kF32);

// Ops are built per input shape and dtype (DESIGN: ops/); modules key their
// op caches by both.
using OpKey = std::pair<DType, Shape>;
inline OpKey op_key(const Tensor& x) { return {x.dtype(), x.shape()}; }

// The gradient that reaches an op with a fused ReLU: dy masked by its output
// (y > 0), written to `scratch`; dy itself when `relu` is off.
const Tensor& fused_relu_grad(const Tensor& dy, const Tensor& y, bool relu, Tensor& scratch);

// Fills t with draws from normal(0, std).
void init_normal(const Tensor& t, float std, Rng& rng);

}  // namespace cohort::nn
