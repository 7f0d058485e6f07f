// Hostile safetensors files found by tests/fuzz/safetensors_fuzz.cpp. Each must
// be one InputError naming the file (exit 2), like every other malformed file.
#include <cstdint>
#include <fstream>
#include <string>

#include "data/data_test_util.h"
#include "train/checkpoint.h"

namespace cohort {
namespace {

// u64 little-endian header length, then the header.
std::string write_safetensors(const testing::TempDir& dir, const std::string& header) {
  const std::string p = dir.file("finding.safetensors");
  std::ofstream f(p, std::ios::binary);
  const uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header;
  return p;
}

// Found 2026-11-23: a number too large for a double ("1e999") makes
// nlohmann's parser throw out_of_range, not parse_error; load_safetensors
// catches only parse_error, so `cohort train --load F` printed "cohort:
// error: [json.exception.out_of_range.406] number overflow ..." with exit 1
// and no file name. Fixed: load_safetensors catches Json::exception.
TEST(SafetensorsFindings, NumberOverflowIsAnInputErrorNamingTheFile) {
  testing::TempDir dir;
  const std::string p =
      write_safetensors(dir, R"({"w":{"dtype":"F32","shape":[1e999],"data_offsets":[0,4]}})");
  try {
    load_safetensors(p);
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an InputError: " << e.what();
  }
}

}  // namespace
}  // namespace cohort
