#include "train/generate.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/cpus.h"
#include "core/error.h"
#include "core/rng.h"
#include "nn/models/zoo.h"
#include "train/checkpoint.h"

namespace cohort {
namespace {

// Bytes for a vocabulary of 256; otherwise comma-separated ids, each < vocab.
std::vector<int32_t> tokenize(const std::string& prompt, int64_t vocab) {
  std::vector<int32_t> ids;
  if (vocab == 256) {
    for (unsigned char c : prompt) ids.push_back(int32_t(c));
  } else {
    std::stringstream ss(prompt);
    std::string item;
    while (std::getline(ss, item, ',')) {
      char* end = nullptr;
      const long v = std::strtol(item.c_str(), &end, 10);
      COHORT_INPUT_CHECK(!item.empty() && *end == '\0' && v >= 0 && v < vocab, "--prompt: '",
                         item, "' is no token id of the vocabulary of ", vocab,
                         " (give ids as 15496,11,995; text only for a vocabulary of 256)");
      ids.push_back(int32_t(v));
    }
  }
  COHORT_INPUT_CHECK(!ids.empty(), "--prompt is empty");
  return ids;
}

// The next token from one row of logits: the largest (k = 1) or a draw from
// the top k, softmax at `temperature`.
int32_t sample(const float* logits, int64_t vocab, int k, float temperature, Rng& rng) {
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) order[size_t(i)] = int32_t(i);
  k = int(std::min<int64_t>(std::max(k, 1), vocab));
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (k == 1) return order[0];
  std::vector<double> p(static_cast<size_t>(k));
  double sum = 0;
  for (int i = 0; i < k; ++i)
    sum += p[size_t(i)] = std::exp((logits[order[size_t(i)]] - logits[order[0]]) / temperature);
  double u = rng.uniform() * sum;
  for (int i = 0; i < k; ++i)
    if ((u -= p[size_t(i)]) <= 0) return order[size_t(i)];
  return order[size_t(k - 1)];
}

}  // namespace

std::vector<int32_t> generate(const GenerateConfig& cfg) {
  COHORT_INPUT_CHECK(cfg.tokens >= 0 && cfg.tokens <= 1000000, "--tokens must be 0..1000000, got ",
                     cfg.tokens);
  COHORT_INPUT_CHECK(cfg.temperature > 0, "--temperature must be positive, got ", cfg.temperature);
  COHORT_INPUT_CHECK(cfg.top_k >= 1, "--top-k must be at least 1, got ", cfg.top_k);
  auto spec = nn::find_model(cfg.model, cfg.seq, cfg.vocab);
  COHORT_INPUT_CHECK(spec->input.kind == nn::InputKind::kTokens, "--model ", cfg.model,
                     " reads images; generate needs a token model (gpt2-tiny, gpt2, ...)");
  COHORT_INPUT_CHECK(!cfg.load.empty(), "--load: give the weights to sample from");
  if (cfg.threads > 0) omp_set_num_threads(cfg.threads);
  auto model = nn::build_model(spec, cfg.seed);
  load_checkpoint(cfg.load, model->name(), model->params(), &model->buffers());
  const int64_t vocab = model->num_classes(), context = model->input_shape()[0];
  std::vector<int32_t> ids = tokenize(cfg.prompt, vocab);
  Rng rng(cfg.seed);
  nn::Context ctx;
  ctx.training = false;
  for (int n = 0; n < cfg.tokens; ++n) {
    const int64_t t = std::min<int64_t>(int64_t(ids.size()), context);
    Tensor x = Tensor::empty({1, t}, DType::kI32);
    std::copy(ids.end() - t, ids.end(), x.i32());
    const Tensor& logits = model->forward(x, ctx);
    ids.push_back(sample(logits.f32() + (t - 1) * vocab, vocab, cfg.top_k, cfg.temperature, rng));
  }
  return ids;
}

std::string detokenize(const std::vector<int32_t>& ids, int64_t vocab) {
  std::string out;
  for (int32_t id : ids) {
    if (vocab == 256)
      out += char(id);
    else
      out += (out.empty() ? "" : ",") + std::to_string(id);
  }
  return out;
}

}  // namespace cohort
