// libFuzzer target: the IDX reader (raw or gzipped images and labels files).
#include "core/error.h"
#include "data/idx.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = cohort::fuzz::write_input(data, size, "-idx");
  try {
    cohort::read_idx_images(path);
  } catch (const cohort::InputError&) {
  }
  try {
    cohort::read_idx_labels(path);
  } catch (const cohort::InputError&) {
  }
  return 0;
}
