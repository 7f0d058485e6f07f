// Model: a named Sequential of top-level layers (the units a pipeline cuts
// into stages, DESIGN principle 3) with its parameter and buffer arenas.
// What a model is — its input, output, loss, initialization and layers — is
// its ModelSpec (registered in nn/models/zoo.cpp, or made by a caller), so
// strategies can build more models of the same kind without knowing its name.
#pragma once
#include <functional>
#include <memory>

#include "nn/loss.h"
#include "nn/sequential.h"

namespace cohort::nn {

// What one sample fed to the model is.
enum class InputKind { kImage, kTokens };
struct InputSpec {
  InputKind kind = InputKind::kImage;
  Shape shape;  // image: {H, W, C} (f32); tokens: {T} (i32 token ids)
  static InputSpec image(int64_t h, int64_t w, int64_t c) { return {InputKind::kImage, {h, w, c}}; }
  static InputSpec tokens(int64_t t) { return {InputKind::kTokens, {t}}; }
};

// What the model predicts: one class per sample, or one token per position.
enum class OutputKind { kClasses, kTokens };

struct ModelSpec {
  std::string name, description;
  InputSpec input;
  OutputKind output = OutputKind::kClasses;
  int classes = 10;  // classes, or the vocabulary for tokens
  InitStyle init = InitStyle::kTorch;
  std::function<std::unique_ptr<Sequential>()> layers;  // unbuilt
  // The loss the model trains with; softmax cross-entropy when empty.
  std::function<std::unique_ptr<Loss>()> loss;
  // Token models: the same model at another context (seq) or vocabulary
  // (0: unchanged); empty for models of images.
  std::function<std::shared_ptr<const ModelSpec>(int64_t seq, int64_t vocab)> with_tokens;
  // Classifiers: the name of the last layer, the one that maps features to
  // classes ("fc", "classifier.6"); its tensors are `head + ".weight"` and
  // `head + ".bias"`. --load re-initializes it when its shape differs from
  // the file's; "" for token models. `--freeze backbone` freezes everything
  // before it.
  std::string head;
  // Classifiers: the same model with a head of `classes` outputs (--num-classes).
  std::function<std::shared_ptr<const ModelSpec>(int64_t classes)> with_classes;
  // Models that take any image size from min_image x min_image up (adaptive
  // pooling: the torchvision architectures): the same model at H x W input.
  // Empty for fixed-size models.
  std::function<std::shared_ptr<const ModelSpec>(int64_t h, int64_t w)> with_image;
  int64_t min_image = 0;
};

// The model's input at `precision`: f32 images become bf16 (or are rounded to
// fp16 values) in `scratch`; token ids and f32 runs pass through.
const Tensor& cast_input(const Tensor& x, DType precision, Tensor& scratch);

// Called around each top-level layer's forward and backward (ZeRO stage 3
// gathers a layer's parameters just before it runs and frees them after).
// Every forward and backward through the model calls them, training or
// evaluation alike, so under ranks every rank must make the same calls.
class LayerHooks {
 public:
  virtual ~LayerHooks() = default;
  virtual void before_forward(size_t layer) = 0;
  virtual void after_forward(size_t layer) = 0;
  virtual void before_backward(size_t layer) = 0;
  virtual void after_backward(size_t layer) = 0;
  // The matrix the hooks stream in row blocks, set in Context::rows for
  // every layer (null: none).
  virtual RowStream* row_stream() { return nullptr; }
  // The hooks around the leaves of layer i, set in Context::leaves while it
  // runs (null: the layer is one unit).
  virtual LeafHooks* leaf_hooks(size_t layer) { return nullptr; }
};

// [begin, end) ranges of a parameter arena.
using Ranges = std::vector<std::pair<int64_t, int64_t>>;

class Model {
 public:
  explicit Model(std::shared_ptr<const ModelSpec> spec);

  // Registers, allocates and initializes every parameter from `seed`.
  void build(uint64_t seed);
  // Registers every parameter and buffer as views into `owner`'s arenas (a
  // model of the same layers): the same weights, gradients and statistics,
  // with this model's own activations. Pipeline micro-batches in flight each
  // run on one.
  void build_shared(Model& owner);

  const ModelSpec& spec() const { return *spec_; }
  const std::string& name() const { return spec_->name; }
  const Shape& input_shape() const { return spec_->input.shape; }
  int num_classes() const { return spec_->classes; }
  const Loss& loss() const { return *loss_; }
  Sequential& layers() { return *layers_; }
  Arena& params() { return params_; }
  Arena& buffers() { return buffers_; }
  int64_t num_params() const { return params_.size(); }
  // Forward multiply-adds x2 per sample; a training step costs about 3x this.
  double forward_flops_per_image() const { return layers_->flops(spec_->input.shape); }

  // Another model of this spec: its own arenas, built from `seed`.
  std::unique_ptr<Model> clone(uint64_t seed) const;
  // Another model of this spec over this model's arenas (build_shared).
  std::unique_ptr<Model> view();

  // x: {N, H, W, C} (or {N, T} tokens) -> outputs {N, classes} (or {N, T, vocab}),
  // in the activation dtype of ctx.precision.
  const Tensor& forward(const Tensor& x, Context& ctx);
  void backward(const Tensor& dout, Context& ctx);

  // Fine-tuning (nn/freeze.cpp): "none", "backbone" (everything before
  // spec().head) or a layer's dotted name ("layer3", "layer3.1"): it and
  // everything before it. Frozen layers are a prefix of the model and of the
  // arena, [0, frozen_params()): they train in eval mode and their backward
  // never runs; the first trainable layer computes no dx. InputError naming
  // --freeze for a name the model lacks or a freeze that leaves nothing.
  void freeze(const std::string& what);
  const std::string& frozen_through() const { return freeze_; }
  int64_t frozen_params() const { return frozen_params_; }
  // [frozen_params(), num_params()): what the optimizer and every strategy's
  // communication cover.
  std::pair<int64_t, int64_t> trainable() const { return {frozen_params_, num_params()}; }

  // Null (the default) for none; the hooks outlive their use.
  void set_layer_hooks(LayerHooks* hooks) { hooks_ = hooks; }
  // The parameter ranges top-level layer i reads: its own range and, for a
  // layer tied to another's weight (GPT-2's lm_head), the owner's slot.
  Ranges layer_ranges(size_t i) const;

 private:
  std::shared_ptr<const ModelSpec> spec_;
  std::unique_ptr<Sequential> layers_;
  std::unique_ptr<Loss> loss_;
  Arena params_, buffers_;
  Tensor input_;  // the batch's images in the compute precision
  LayerHooks* hooks_ = nullptr;
  std::string freeze_ = "none";
  int64_t frozen_params_ = 0;
};


// A built model of `spec`, initialized from `seed`.
std::unique_ptr<Model> build_model(std::shared_ptr<const ModelSpec> spec, uint64_t seed);

}  // namespace cohort::nn
