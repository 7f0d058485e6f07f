// `cohort generate`: sample text from a trained token model (GPT-2 family):
// greedy (--top-k 1) or top-k with a temperature, one token at a time over
// the last `context` tokens (no cache: each token reruns the window).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cohort {

struct GenerateConfig {
  std::string model = "gpt2-tiny";
  int64_t seq = 0, vocab = 0;  // as cohort train's --seq / --vocab
  std::string load;            // weights (cohort train --save)
  std::string prompt = "\n";   // bytes (vocabulary 256), or token ids "15496,11,995"
  int tokens = 200;
  int top_k = 40;              // 1: greedy
  float temperature = 1.0f;
  uint64_t seed = 0;
  int threads = 0;
};

// The prompt and the tokens sampled after it, as ids.
std::vector<int32_t> generate(const GenerateConfig& cfg);

// Bytes for a vocabulary of 256; ids joined by commas otherwise.
std::string detokenize(const std::vector<int32_t>& ids, int64_t vocab);

}  // namespace cohort
