// The op harness's cases for the transformer ops (GPT-2's, as llm.c defines
// them): embedding, layer-norm, GELU and causal self-attention, several
// shapes each (T = 1, C not a multiple of 16, one head), in f32 and bf16
// like every case of the table (op_cases.cpp).
#include <gtest/gtest.h>

#include "ops/attention.h"
#include "ops/embedding.h"
#include "ops/harness.h"
#include "ops/layer_norm.h"

namespace cohort::op_harness {
namespace {

// ------------------------------------------------------------------ embedding
// y = wte[ids] + wpe[t]: the two tables are the differentiable inputs (f32),
// the ids fixed, drawn from a small vocabulary so tokens repeat. Only wpe's
// first T rows are an input; the op gets the whole {maxT, C} table, whose
// other rows are fixed (and its backward must leave them alone).

class EmbeddingHarness : public OpHarness {
 public:
  EmbeddingHarness(const ops::EmbeddingShape& s, Rng& rng) : OpHarness(s.dtype), s_(s) {
    ids_.resize(size_t(s.b * s.t));
    for (auto& id : ids_) id = int32_t(rng.below(uint64_t(s.vocab)));
    add_weight("wte", randn(s.vocab * s.c, rng));
    add_weight("wpe", randn(s.t * s.c, rng, 0.5f));
    wpe_tail_ = randn((s.max_t - s.t) * s.c, rng);
    out_size = s.b * s.t * s.c;
  }
  void forward(Vec& y) override {
    const Vec wpe = full_wpe(in[1].v);
    ops::embedding_forward(s_, ids_.data(), in[0].v.data(), wpe.data(), act_out(y));
  }
  void backward(const Vec& dy, std::vector<Vec>& g, bool accumulate) override {
    Vec dwpe = full_wpe(g[1]);
    ops::embedding_backward(s_, ids_.data(), act(dy), g[0].data(), dwpe.data(), accumulate);
    std::copy(dwpe.begin(), dwpe.begin() + std::ptrdiff_t(g[1].size()), g[1].begin());
    EXPECT_TRUE(std::equal(wpe_tail_.begin(), wpe_tail_.end(), dwpe.begin() + std::ptrdiff_t(g[1].size())))
        << "dwpe rows past T were written";
  }
  void ref_forward(Vec& y) override {
    ref::embedding_forward(s_, ids_.data(), in[0].v.data(), in[1].v.data(), y.data());
  }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    ref::embedding_backward(s_, ids_.data(), dy.data(), g[0].data(), g[1].data());
  }

 private:
  // rows {T, C} followed by the fixed rows T..maxT-1.
  Vec full_wpe(const Vec& rows) const {
    Vec w = rows;
    w.insert(w.end(), wpe_tail_.begin(), wpe_tail_.end());
    return w;
  }

  ops::EmbeddingShape s_;
  std::vector<int32_t> ids_;
  Vec wpe_tail_;
};

// ------------------------------------------------------------------ layer-norm

class LayerNormHarness : public NormHarness<ops::LayerNorm> {
 public:
  LayerNormHarness(const ops::LayerNormShape& s, Rng& rng)
      : NormHarness(s.dtype, ops::make_layer_norm(Device::kCpu, s), s.rows * s.c, s.c,
                    [&](int64_t i) { return i / s.c; }, rng),
        s_(s) {}
  void forward(Vec& y) override {
    op_->forward(act(in[0].v), in[1].v.data(), in[2].v.data(), act_out(y));
  }
  void ref_forward(Vec& y) override {
    ref::layer_norm_forward(s_, in[0].v.data(), in[1].v.data(), in[2].v.data(), y.data());
  }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    ref::layer_norm_backward(s_, in[0].v.data(), dy.data(), in[1].v.data(), g[0].data(),
                             g[1].data(), g[2].data());
  }

 private:
  ops::LayerNormShape s_;
};

// ------------------------------------------------------------------ GELU

class GeluHarness : public OpHarness {
 public:
  GeluHarness(int64_t n, DType dtype, Rng& rng) : OpHarness(dtype), n_(n) {
    add_activation("x", randn(n, rng, 2.0f));
    out_size = n;
  }
  void forward(Vec& y) override { ops::gelu_forward(act(in[0].v), act_out(y), n_); }
  void backward(const Vec& dy, std::vector<Vec>& g, bool) override {
    ops::gelu_backward(act(dy), act(in[0].v), act_out(g[0]), n_);
  }
  void ref_forward(Vec& y) override { ref::gelu_forward(in[0].v.data(), y.data(), n_); }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    ref::gelu_backward(dy.data(), in[0].v.data(), g[0].data(), n_);
  }

 private:
  int64_t n_;
};

// ------------------------------------------------------------------ causal self-attention

class AttentionHarness : public OpHarness {
 public:
  AttentionHarness(const ops::AttentionShape& s, Rng& rng)
      : OpHarness(s.dtype), s_(s), op_(ops::make_attention(Device::kCpu, s)) {
    add_activation("qkv", randn(s.b * s.t * 3 * s.c, rng));
    out_size = s.b * s.t * s.c;
  }
  void forward(Vec& y) override { op_->forward(act(in[0].v), act_out(y)); }
  void backward(const Vec& dy, std::vector<Vec>& g, bool) override {
    Vec y(static_cast<size_t>(out_size));
    forward(y);
    op_->backward(act(in[0].v), act(dy), act_out(g[0]));
  }
  void ref_forward(Vec& y) override { ref::attention_forward(s_, in[0].v.data(), y.data()); }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    ref::attention_backward(s_, in[0].v.data(), dy.data(), g[0].data());
  }

 private:
  ops::AttentionShape s_;
  std::unique_ptr<ops::Attention> op_;
};

}  // namespace

void transformer_cases(std::vector<OpCase>& cases) {
  const ops::EmbeddingShape embeddings[] = {
      {2, 5, 8, 7, 6},      // B=2, T=5, C=8; V=7 < B*T: tokens repeat
      {1, 1, 3, 4, 1},      // one token
      {3, 4, 20, 50, 9},    // C not a multiple of 16, T < maxT
      {4, 64, 272, 97, 64}, // past the threaded loops' threshold
  };
  for (const auto& e : embeddings) {
    std::string name = "embedding" + name_of({{"b", e.b}, {"t", e.t}, {"c", e.c}, {"v", e.vocab},
                                              {"maxt", e.max_t}});
    cases.push_back({name, [e](Rng& rng, DType dt) -> std::unique_ptr<OpHarness> {
                       ops::EmbeddingShape s = e;
                       s.dtype = dt;
                       return std::make_unique<EmbeddingHarness>(s, rng);
                     }});
  }

  const int64_t norms[][2] = {{10, 8}, {1, 5}, {3, 2}, {7, 33}, {16, 768}};
  for (const auto& n : norms) {
    std::string name = "layer_norm" + name_of({{"rows", n[0]}, {"c", n[1]}});
    cases.push_back({name, [n](Rng& rng, DType dt) -> std::unique_ptr<OpHarness> {
                       ops::LayerNormShape s{n[0], n[1]};
                       s.dtype = dt;
                       return std::make_unique<LayerNormHarness>(s, rng);
                     }});
  }

  for (int64_t n : {1, 17, 1000})
    cases.push_back(
        {"gelu_n" + std::to_string(n), [n](Rng& rng, DType dt) -> std::unique_ptr<OpHarness> {
           return std::make_unique<GeluHarness>(n, dt, rng);
         }});

  const ops::AttentionShape attentions[] = {
      {2, 5, 8, 2},    // B=2, T=5, C=8, NH=2
      {1, 1, 8, 2},    // T = 1: every query sees only itself
      {2, 7, 12, 3},   // HS = 4
      {1, 16, 24, 1},  // one head, C not a multiple of 16
      {1, 32, 64, 4},  // HS = 16
  };
  for (const auto& a : attentions) {
    std::string name =
        "attention" + name_of({{"b", a.b}, {"t", a.t}, {"c", a.c}, {"nh", a.heads}});
    cases.push_back({name, [a](Rng& rng, DType dt) -> std::unique_ptr<OpHarness> {
                       ops::AttentionShape s = a;
                       s.dtype = dt;
                       return std::make_unique<AttentionHarness>(s, rng);
                     }});
  }
}

}  // namespace cohort::op_harness
