// The layers of the model zoo. Each keeps one op instance per input shape and
// dtype (primitives built once per shape, DESIGN: ops/), its output and its dx.
#pragma once
#include <map>

#include "nn/module.h"
#include "ops/batch_norm.h"
#include "ops/conv2d.h"
#include "ops/linear.h"
#include "ops/pool.h"

namespace cohort::nn {

class BatchNorm2d;

// src {N, H, W, Ci} -> dst {N, OH, OW, Co}; optional fused ReLU.
class Conv2d final : public Module {
 public:
  Conv2d(int64_t c_in, int64_t c_out, int64_t k, int64_t stride = 1, int64_t pad = 0,
         bool bias = true, bool relu = false);
  std::string type() const override { return "conv2d"; }
  Shape output_shape(const Shape& in) const override;
  double flops(const Shape& in) const override;
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  const Tensor& backward(const Tensor& dy, Context& ctx) override;
  void set_frozen(bool v) override;
  // Frozen, with the frozen batch-norm `norm` next: runs as one conv with the
  // norm's scale folded into the weights and its shift into the bias (and its
  // ReLU fused); the norm then passes its input through. No extra pass over
  // the activations, and the weights stay as they are in the arena.
  void fold(BatchNorm2d& norm);

 protected:
  std::vector<Param> params() override;

 private:
  ops::ConvShape shape_for(const Shape& x, DType dtype = DType::kF32) const;
  ConstView folded_weights();
  int64_t c_in_, c_out_, k_, stride_, pad_;
  bool bias_, relu_;
  Tensor weight_, dweight_, b_, db_;
  Tensor x_, y_, dy_relu_, dx_;
  std::map<OpKey, std::unique_ptr<ops::Conv2d>> ops_;
  ops::Conv2d* op_ = nullptr;
  std::map<const ops::Conv2d*, const void*> laid_out_;  // frozen: op -> weights it laid out
  BatchNorm2d* folded_ = nullptr;
  const void* folded_from_ = nullptr;  // the weights folded_w_ was made from
  std::vector<float> folded_w_, folded_b_;
};

// conv + ReLU + max-pool, fused and run over the batch in chunks small enough
// that a chunk's conv output stays in L2: the full-size conv output never goes
// to memory, only the pooled output and the argmax do. Backward needs no ReLU
// pass over the big tensor either: the gradient reaches only each window's
// argmax, whose ReLU mask is (pooled output > 0). Parameters are named as the
// conv's ("conv1.weight"), so models and checkpoints read as in PyTorch.
class ConvPool final : public Module {
 public:
  ConvPool(int64_t c_in, int64_t c_out, int64_t k, int64_t pad, int64_t pool);
  std::string type() const override { return "conv_relu_pool"; }
  Shape output_shape(const Shape& in) const override;
  double flops(const Shape& in) const override;
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  const Tensor& backward(const Tensor& dy, Context& ctx) override;

 protected:
  std::vector<Param> params() override;

 private:
  ops::ConvShape conv_shape(const Shape& x, DType dtype = DType::kF32) const;
  int64_t chunk_size(const Shape& x, DType dtype) const;
  struct Ops {
    std::unique_ptr<ops::Conv2d> conv;
    std::unique_ptr<ops::MaxPool2d> pool;
  };
  Ops& ops_for(const Shape& x_chunk, DType dtype, Context& ctx);
  int64_t c_in_, c_out_, k_, pad_, pool_;
  Tensor weight_, dweight_, b_, db_;
  Tensor x_, y_, dmasked_, dx_, scratch_;
  std::vector<uint8_t> workspace_;
  size_t ws_stride_ = 0;
  std::map<OpKey, Ops> ops_;
};

// src {..., I} -> dst {..., O}, as PyTorch's nn.Linear: leading dimensions
// (batch, sequence) are flattened into the rows of one matrix product.
// Optional fused ReLU.
// Rows of a tied weight per block (GPT-2's head over 50257 tokens: 25
// blocks of 6 MiB at width 768).
constexpr int64_t kTiedBlockRows = 2048;
struct LinearOptions {
  bool bias = true;
  float init_std = 0;   // > 0: weights from normal(0, init_std), biases zero (GPT-2)
  std::string tied_to;  // the weight is this earlier parameter's (GPT-2's lm_head: "wte.weight")
};
class Linear final : public Module {
 public:
  Linear(int64_t in, int64_t out, bool relu = false, LinearOptions options = {});
  std::string type() const override { return "linear"; }
  Shape output_shape(const Shape& in) const override;
  // Per image: one product of in x out for each of its rows ({F}: 1, {T, F}: T).
  double flops(const Shape& in) const override { return 2.0 * numel(in) * out_; }
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  const Tensor& backward(const Tensor& dy, Context& ctx) override;

 protected:
  std::vector<Param> params() override;

 private:
  // A tied weight runs in blocks of output rows (nn/linear_blocks.cpp),
  // each fetched from Context::rows where that streams it.
  const Tensor& forward_blocks(Context& ctx);
  const Tensor& backward_blocks(const Tensor& dy, Context& ctx);
  ops::Linear& block_op(int64_t rows, int64_t out, Context& ctx);

  int64_t in_, out_;
  bool relu_;
  LinearOptions options_;
  Tensor weight_, dweight_, b_, db_;
  Tensor x_, y_, dy_relu_, dx_;  // x_ and y_ as {rows, I} and {rows, O}
  Tensor block_y_, block_dx_;    // a block's output (or its gradient) and dx share
  Tensor dx_sum_;                // bf16: the shares added up in f32
  Shape x_shape_;
  std::map<OpKey, std::unique_ptr<ops::Linear>> ops_;
  ops::Linear* op_ = nullptr;
  bool blocks_ = false;            // the last forward ran in blocks
  RowStream* streamed_ = nullptr;  // and its stream
};

// k x k max-pool, stride (0: k), implicit -inf padding on every side (PyTorch's).
class MaxPool2d final : public Module {
 public:
  explicit MaxPool2d(int64_t k, int64_t stride = 0, int64_t pad = 0)
      : k_(k), stride_(stride ? stride : k), pad_(pad) {}
  std::string type() const override { return "max_pool2d"; }
  Shape output_shape(const Shape& in) const override;
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  const Tensor& backward(const Tensor& dy, Context& ctx) override;

 private:
  ops::PoolShape shape_for(const Shape& x, DType dtype = DType::kF32) const;
  int64_t k_, stride_, pad_;
  Tensor y_, dx_;
  std::map<OpKey, std::unique_ptr<ops::MaxPool2d>> ops_;
  ops::MaxPool2d* op_ = nullptr;
};

// {N, H, W, C} -> {N, C}
class GlobalAvgPool final : public Module {
 public:
  std::string type() const override { return "global_avg_pool"; }
  Shape output_shape(const Shape& in) const override { return {in[0], in[3]}; }
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  const Tensor& backward(const Tensor& dy, Context& ctx) override;

 private:
  Shape in_shape_;
  Tensor y_, dx_;
};

// {N, H, W, C} -> {N, OH, OW, C}: PyTorch's AdaptiveAvgPool2d (torchvision's
// VGG pools to 7x7 whatever the input size, so it takes 32x32 images too).
class AdaptiveAvgPool2d final : public Module {
 public:
  AdaptiveAvgPool2d(int64_t out_h, int64_t out_w) : out_h_(out_h), out_w_(out_w) {}
  std::string type() const override { return "adaptive_avg_pool2d"; }
  Shape output_shape(const Shape& in) const override { return {in[0], out_h_, out_w_, in[3]}; }
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  const Tensor& backward(const Tensor& dy, Context& ctx) override;

 private:
  ops::AdaptivePoolShape shape_for(const Shape& x) const;
  int64_t out_h_, out_w_;
  Shape in_shape_;
  Tensor y_, dx_;
};

// Per-channel batch-norm over NHWC; optional ReLU after it, fused into the op.
class BatchNorm2d final : public Module {
 public:
  explicit BatchNorm2d(int64_t c, bool relu = false) : c_(c), relu_(relu) {}
  std::string type() const override { return "batch_norm2d"; }
  Shape output_shape(const Shape& in) const override { return in; }
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  const Tensor& backward(const Tensor& dy, Context& ctx) override;
  // Frozen, it is y = relu?(x * scale + shift) per channel (Conv2d::fold).
  void affine(std::vector<float>& scale, std::vector<float>& shift) const;
  bool relu() const { return relu_; }
  void set_folded() { folded_ = true; }

 protected:
  std::vector<Param> params() override;
  std::vector<Buffer> buffers() override;

 private:
  int64_t c_;
  bool relu_;
  bool folded_ = false;  // a conv before it does its work
  Tensor gamma_, dgamma_, beta_, dbeta_, running_mean_, running_var_, batches_;
  Tensor x_, y_, dx_;
  std::map<OpKey, std::unique_ptr<ops::BatchNorm>> ops_;
  ops::BatchNorm* op_ = nullptr;
};

class ReLU final : public Module {
 public:
  std::string type() const override { return "relu"; }
  Shape output_shape(const Shape& in) const override { return in; }
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  const Tensor& backward(const Tensor& dy, Context& ctx) override;

 private:
  Tensor y_, dx_;
};

// Inverted dropout; `channels` drops whole feature maps of NHWC input (Dropout2d).
class Dropout final : public Module {
 public:
  explicit Dropout(float p, bool channels = false) : p_(p), channels_(channels) {}
  std::string type() const override { return channels_ ? "dropout2d" : "dropout"; }
  Shape output_shape(const Shape& in) const override { return in; }
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  const Tensor& backward(const Tensor& dy, Context& ctx) override;

 private:
  float p_;
  bool channels_;
  bool active_ = false;
  Shape shape_;
  Tensor mask_, y_, dx_;
};

// {N, H, W, C} -> {N, C*H*W} in PyTorch's (C, H, W) order, so a following
// Linear's weight has the same layout as in PyTorch.
class Flatten final : public Module {
 public:
  std::string type() const override { return "flatten"; }
  Shape output_shape(const Shape& in) const override { return {in[0], in[1] * in[2] * in[3]}; }
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  const Tensor& backward(const Tensor& dy, Context& ctx) override;

 private:
  Shape in_shape_;
  Tensor y_, dx_;
};

}  // namespace cohort::nn
