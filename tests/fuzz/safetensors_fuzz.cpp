// libFuzzer target: the safetensors checkpoint reader (load_safetensors).
#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    cohort::load_safetensors(cohort::fuzz::write_input(data, size, ".safetensors"));
  } catch (const cohort::InputError&) {
  }
  return 0;
}
