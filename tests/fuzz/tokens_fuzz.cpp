// libFuzzer target: the llm.c token shard reader (header against size, then
// every token read and windowed as a GPT-2 model with T=3 would take them).
#include "core/error.h"
#include "data/tokens.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = cohort::fuzz::write_input(data, size, "-tokens");
  try {
    cohort::TokenStream stream({cohort::open_token_shard(path)});
    cohort::make_token_split(stream, 3, 50257, 0, "tokens");
  } catch (const cohort::InputError&) {
  }
  return 0;
}
