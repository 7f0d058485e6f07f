// `cohort bench step` and precision: --peak measures the matmul peak of the
// run's precision and names it; --peer pytorch runs the peer in the same
// precision; fp16 with --peer pytorch is refused before any work.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench/peer.h"
#include "support/support.h"

namespace {

using cohort::testing_support::last_json;
using nlohmann::json;

const std::string kStep =
    std::string(COHORT_BIN) + " bench step --model mnist-small --batch 32 --steps 2 --warmup 1";

TEST(BenchStep, Bf16PeakAndPeerInTheRunsPrecision) {
  ASSERT_TRUE(cohort::peer_available()) << "python3-torch not importable";
  auto r = cohort::testing_support::run_command(kStep + " --precision bf16 --peak --peer pytorch");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("bf16 matmul peak "), std::string::npos) << r.out;
  const json j = last_json(r.out);
  EXPECT_EQ(j.at("matmul_peak_dtype"), "bf16") << r.out;
  EXPECT_GT(j.at("matmul_peak_gflops").get<double>(), 0) << r.out;
  EXPECT_EQ(j.at("peer_precision"), "bf16") << r.out;
}

TEST(BenchStep, Fp16PeakIsTheFp32One) {
  auto r = cohort::testing_support::run_command(kStep + " --precision fp16 --peak");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("fp32 matmul peak "), std::string::npos) << r.out;
  EXPECT_EQ(last_json(r.out).at("matmul_peak_dtype"), "fp32") << r.out;
}

TEST(BenchStep, Fp16WithPyTorchPeerIsRefused) {
  cohort::testing_support::expect_one_line_error(kStep + " --precision fp16 --peer pytorch",
                                                 "--precision fp16");
}

}  // namespace
