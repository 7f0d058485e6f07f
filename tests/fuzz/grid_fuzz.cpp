// libFuzzer target: the `bench grid` JSON file, through resolve_grid (which
// parses the file, then every comma list it holds).
#include "bench/grid.h"
#include "core/error.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cohort::GridFlags flags;
  flags.grid = cohort::fuzz::write_input(data, size, "-grid.json");
  try {
    cohort::resolve_grid(flags);
  } catch (const cohort::InputError&) {
  }
  return 0;
}
