// round_to_f16 against core/dtype.h's scalar to_f16, bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/elementwise.h"
#include "support/support.h"

namespace cohort::ops {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(Elementwise, RoundToF16MatchesScalarConversion) {
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f,
                          1e5f, -1e30f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          std::ldexp(1.0f, -14), std::ldexp(1.0f, -15),  // normal, subnormal
                          std::ldexp(1.0f, -24), std::ldexp(1.0f, -25),  // smallest; a tie to 0
                          std::ldexp(1.5f, -24), std::ldexp(1.5f, -25), 6e-8f, -3e-6f,
                          1.0f + std::ldexp(1.0f, -11),   // a tie: to even (1)
                          1.0f + std::ldexp(3.0f, -11),   // a tie: to even (up)
                          std::numeric_limits<float>::denorm_min()};
  // Then random bit patterns (every exponent, NaNs with payloads, f32
  // subnormals) and random values in fp16's range, to a length that runs
  // threaded and leaves a tail for the vector loop.
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> exp2(-30.0f, 18.0f);
  while (x.size() < 100000) {
    x.push_back(std::bit_cast<float>(uint32_t(gen())));
    const float v = std::exp2(exp2(gen));
    x.push_back(gen() & 1 ? v : -v);
  }
  x.resize(100003);
  std::vector<float> y = x;
  round_to_f16(y.data(), int64_t(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = from_f16(to_f16(x[i]));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i])) << "element " << i << " " << x[i];
      continue;
    }
    ASSERT_EQ(bits(y[i]), bits(want)) << "element " << i << ": " << x[i] << " -> " << y[i]
                                      << ", want " << want;
  }
  EXPECT_EQ(y[6], std::numeric_limits<float>::infinity());  // 65520 overflows
  EXPECT_EQ(y[5], 65504.0f);
}

TEST(Elementwise, RoundToF16NamesAWrongDtype) {
  Tensor b = Tensor::zeros({4}, DType::kBF16);
  const std::string e = testing_support::error_of([&] { round_to_f16(b, 4); });
  EXPECT_NE(e.find("round_to_f16"), std::string::npos) << e;
  EXPECT_NE(e.find("bf16"), std::string::npos) << e;
}

}  // namespace
}  // namespace cohort::ops
