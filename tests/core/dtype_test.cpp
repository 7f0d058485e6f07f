// Element types, devices and the allocator behind Tensor::empty.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/memory.h"
#include "core/tensor.h"

namespace cohort {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF16), 2u);
  EXPECT_EQ(dtype_size(DType::kI32), 4u);
  EXPECT_STREQ(dtype_name(DType::kF32), "f32");
  EXPECT_STREQ(dtype_name(DType::kBF16), "bf16");
  EXPECT_STREQ(dtype_name(DType::kF16), "f16");
  EXPECT_STREQ(dtype_name(DType::kI32), "i32");
  EXPECT_EQ(dtype_bytes(DType::kBF16, 10), 20u);
  EXPECT_EQ(dtype_of<F16>, DType::kF16);
  EXPECT_EQ(dtype_of<int32_t>, DType::kI32);
}

TEST(DType, F16ExactValuesRoundTrip) {
  // Normals, the largest finite, the smallest normal and subnormal, signed zero.
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 0.333251953125f, 65504.0f, -65504.0f,
                  6.103515625e-05f, 5.960464477539063e-08f, 3.0517578125e-05f}) {
    EXPECT_EQ(from_f16(to_f16(f)), f) << f;
    EXPECT_EQ(std::signbit(from_f16(to_f16(f))), std::signbit(f)) << f;
  }
  EXPECT_EQ(to_f16(1.0f).bits, 0x3c00);
  EXPECT_EQ(to_f16(-2.0f).bits, 0xc000);
  EXPECT_EQ(to_f16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(to_f16(5.960464477539063e-08f).bits, 0x0001);
}

TEST(DType, F16RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: even mantissa (1) wins.
  EXPECT_EQ(from_f16(to_f16(1.00048828125f)), 1.0f);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: even is 1 + 2^-9.
  EXPECT_EQ(from_f16(to_f16(1.00146484375f)), 1.001953125f);
  EXPECT_EQ(from_f16(to_f16(0.1f)), 0.0999755859375f);
  // Halfway to 2^16 rounds to infinity; just under it to the largest finite.
  EXPECT_TRUE(std::isinf(from_f16(to_f16(65520.0f))));
  EXPECT_EQ(from_f16(to_f16(65519.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(from_f16(to_f16(1e10f))));
  // Subnormals: 1.5 * 2^-24 ties to 2 * 2^-24; 2^-25 ties to zero.
  EXPECT_EQ(from_f16(to_f16(8.940696716308594e-08f)), 1.1920928955078125e-07f);
  EXPECT_EQ(from_f16(to_f16(2.9802322387695312e-08f)), 0.0f);
  EXPECT_TRUE(std::isnan(from_f16(to_f16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(from_f16(to_f16(-std::numeric_limits<float>::infinity()))));
}

TEST(DType, F16EveryValueRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const F16 h{uint16_t(b)};
    const float f = from_f16(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(to_f16(f).bits, h.bits) << std::hex << b;
  }
}

// The buffer conversions (vectorized, threaded past 64k elements) give the
// scalar to_bf16 / from_bf16 bits for every kind of value: ties to even,
// carries into the exponent, infinities, NaN (kept quiet), subnormals.
TEST(DType, Bf16BufferConversionMatchesScalar) {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, 1.00390625f, 1.01171875f, 3.4e38f, -3.4e38f,
                          1e-40f, -1e-45f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  uint32_t x = 12345;
  while (v.size() < 200000) {  // random bit patterns, past the threaded size
    x = x * 1664525u + 1013904223u;
    float f;
    std::memcpy(&f, &x, 4);
    v.push_back(f);
  }
  std::vector<BF16> b(v.size());
  std::vector<float> back(v.size());
  f32_to_bf16(v.data(), b.data(), v.size());
  bf16_to_f32(b.data(), back.data(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(b[i].bits, to_bf16(v[i]).bits) << "element " << i << " = " << v[i];
    const float want = from_bf16(b[i]);
    ASSERT_EQ(std::memcmp(&back[i], &want, 4), 0) << "element " << i;
  }
}

TEST(DType, TensorCopyConvertsBetweenFloatTypes) {
  Tensor a = Tensor::empty({3});
  a.f32()[0] = 1.5f, a.f32()[1] = -0.25f, a.f32()[2] = 1024.0f;
  Tensor h = Tensor::empty({3}, DType::kF16), b = Tensor::empty({3}, DType::kBF16);
  h.copy_from(a);
  b.copy_from(h);
  Tensor c = Tensor::zeros({3});
  c.copy_from(b);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.f32()[i], a.f32()[i]);
  Tensor labels = Tensor::empty({3}, DType::kI32);
  labels.fill(7.0f);
  EXPECT_EQ(labels.i32()[2], 7);
  EXPECT_EQ(labels.nbytes(), 12u);
  EXPECT_THROW(labels.copy_from(a), Error);
}

TEST(Device, TensorKeepsItsDevice) {
  Tensor t = Tensor::empty({2, 3}, DType::kBF16);
  EXPECT_EQ(t.device(), Device::kCpu);
  EXPECT_EQ(t.nbytes(), 12u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  Tensor v = Tensor::view(t.data(), {6}, DType::kBF16, nullptr, Device::kCuda);
  EXPECT_EQ(v.device(), Device::kCuda);
  EXPECT_EQ(v.slice(1, 3).device(), Device::kCuda);
  EXPECT_THROW(v.zero(), Error);  // host code never writes a device tensor
  EXPECT_STREQ(device_name(Device::kCuda), "cuda");
  // No CUDA allocator in a CPU build: a clear error, not a host pointer.
  EXPECT_THROW(Tensor::empty({4}, DType::kF32, Device::kCuda), Error);
}

// A stand-in device allocator: what a CUDA backend would install.
class CountingAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    bytes_ += bytes;
    return std::aligned_alloc(64, bytes);
  }
  void deallocate(void* p) override {
    ++frees_;
    std::free(p);
  }
  size_t bytes_ = 0;
  int frees_ = 0;
};

TEST(Device, AllocationGoesThroughTheDeviceAllocator) {
  CountingAllocator fake;
  set_allocator(Device::kCuda, &fake);
  {
    auto counter = std::make_shared<MemoryCounter>();
    CountAllocations scope(counter);
    Tensor t = Tensor::empty({100}, DType::kF16, Device::kCuda);
    EXPECT_EQ(t.device(), Device::kCuda);
    EXPECT_EQ(fake.bytes_, 256u);  // 200 bytes, rounded up to whole 64-byte lines
    EXPECT_EQ(counter->live(), 256);
  }
  EXPECT_EQ(fake.frees_, 1);
  set_allocator(Device::kCuda, nullptr);
}

TEST(View, CarriesTheDtypeOfItsSource) {
  Tensor t = Tensor::empty({4}, DType::kBF16);
  ConstView a = t;
  EXPECT_EQ(a.dtype, DType::kBF16);
  EXPECT_EQ(a.data, t.data());
  float f[2];
  View b = f;
  EXPECT_EQ(b.dtype, DType::kF32);
  EXPECT_EQ(b.as<float>(), f);
  ConstView c = b;
  EXPECT_EQ(c.dtype, DType::kF32);
  EXPECT_FALSE(ConstView(nullptr));
  EXPECT_NO_THROW(check_dtype("op", "src", a.dtype, DType::kBF16));
  try {
    check_dtype("conv2d", "src", a.dtype, DType::kF32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "conv2d: src is bf16, expected f32");
  }
}

#ifndef NDEBUG
TEST(DTypeDeathTest, WrongAccessorAssertsInDebugBuilds) {
  Tensor t = Tensor::empty({2}, DType::kBF16);
  EXPECT_DEATH(t.f32(), "wrong dtype");
}
#endif

}  // namespace cohort
