// libFuzzer target: the CIFAR-10 binary batch reader.
#include "core/error.h"
#include "data/cifar.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    cohort::read_cifar_batch(cohort::fuzz::write_input(data, size, "-cifar.bin"));
  } catch (const cohort::InputError&) {
  }
  return 0;
}
