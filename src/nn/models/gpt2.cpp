// GPT-2 (decoder-only transformer, pre-norm blocks), as llm.c's train_gpt2.py
// and Hugging Face's GPT2LMHeadModel define it, under Hugging Face's
// parameter names. The output projection is tied to the token embedding.
#include <cmath>

#include "nn/models/zoo.h"
#include "nn/transformer.h"

namespace cohort::nn {

namespace {

constexpr float kStd = 0.02f;  // GPT-2's init for weights and embeddings

// x + c_proj(attention(c_attn(ln_1(x)))).
std::unique_ptr<Module> attention_half(const GptConfig& g) {
  const int64_t c = g.width;
  LinearOptions in{true, kStd, ""};
  // Residual projections: scaled by 1/sqrt(2 L), as GPT-2 does.
  LinearOptions out{true, kStd / std::sqrt(2.0f * float(g.layers)), ""};
  auto attn = std::make_unique<Sequential>();
  attn->add<Linear>("c_attn", c, 3 * c, false, in)
      .add<CausalAttention>("", c, g.heads)
      .add<Linear>("c_proj", c, c, false, out);
  auto branch = std::make_unique<Sequential>();
  branch->add<LayerNorm>("ln_1", c).add("attn", std::move(attn));
  return std::make_unique<Residual>(std::move(branch), nullptr, PostActivation::kNone);
}

// x + c_proj(gelu(c_fc(ln_2(x)))).
std::unique_ptr<Module> mlp_half(const GptConfig& g) {
  const int64_t c = g.width;
  LinearOptions in{true, kStd, ""};
  LinearOptions out{true, kStd / std::sqrt(2.0f * float(g.layers)), ""};
  auto mlp = std::make_unique<Sequential>();
  mlp->add<Linear>("c_fc", c, 4 * c, false, in)
      .add<Gelu>("gelu")
      .add<Linear>("c_proj", 4 * c, c, false, out);
  auto branch = std::make_unique<Sequential>();
  branch->add<LayerNorm>("ln_2", c).add("mlp", std::move(mlp));
  return std::make_unique<Residual>(std::move(branch), nullptr, PostActivation::kNone);
}

}  // namespace

// ids {B, T} -> logits {B, T, V}. Top-level layers (a pipeline's units): the
// embedding, each block h.{i}, ln_f, lm_head.
std::unique_ptr<Sequential> gpt2(const GptConfig& g) {
  auto s = std::make_unique<Sequential>();
  s->add<TokenEmbedding>("", g.vocab, g.context, g.width);
  for (int64_t i = 0; i < g.layers; ++i) {
    auto block = std::make_unique<Sequential>();
    block->add("", attention_half(g)).add("", mlp_half(g));
    s->add("h." + std::to_string(i), std::move(block));
  }
  s->add<LayerNorm>("ln_f", g.width);
  s->add<Linear>("lm_head", g.width, g.vocab, false, LinearOptions{false, 0, "wte.weight"});
  return s;
}

std::shared_ptr<const ModelSpec> gpt2_spec(const std::string& name, const std::string& about,
                                           const GptConfig& g) {
  auto s = std::make_shared<ModelSpec>();
  s->name = name;
  s->description = about + " (" + std::to_string(g.layers) + " layers, " +
                   std::to_string(g.width) + " wide, " + std::to_string(g.heads) +
                   " heads, vocab " + std::to_string(g.vocab) + ", context " +
                   std::to_string(g.context) + ")";
  s->input = InputSpec::tokens(g.context);
  s->output = OutputKind::kTokens;
  s->classes = int(g.vocab);
  s->init = InitStyle::kTorch;
  s->layers = [g] { return gpt2(g); };
  s->with_tokens = [name, about, g](int64_t seq, int64_t vocab) {
    GptConfig v = g;
    if (seq > 0) v.context = seq;
    if (vocab > 0) v.vocab = vocab;
    return gpt2_spec(name, about, v);
  };
  return s;
}

}  // namespace cohort::nn
