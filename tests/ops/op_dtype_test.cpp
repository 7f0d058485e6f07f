// Ops and dtypes: descriptors carry a DType, oneDNN descriptors are built
// from it, and the CPU ops compute in f32 or bf16 (bf16 activations, f32
// weights and weight gradients). Any other dtype is an Error that names the
// op and the dtype, whether it comes in through the descriptor or through an
// operand; so is an operand whose dtype is not the one its role wants.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "ops/batch_norm.h"
#include "ops/conv2d.h"
#include "ops/cpu/dnnl_util.h"
#include "ops/elementwise.h"
#include "ops/linear.h"
#include "ops/pool.h"
#include "support/support.h"

namespace cohort {
namespace {

using testing_support::error_of;

TEST(OpDtype, DescriptorsDefaultToF32) {
  EXPECT_EQ((ops::ConvShape{1, 4, 4, 1, 1, 3, 3}.dtype), DType::kF32);
  EXPECT_EQ((ops::LinearShape{1, 2, 3}.dtype), DType::kF32);
  EXPECT_EQ((ops::PoolShape{1, 4, 4, 1, 2, 2}.dtype), DType::kF32);
  EXPECT_EQ((ops::BatchNormShape{1, 2, 2, 3}.dtype), DType::kF32);
}

TEST(OpDtype, OneDnnDataTypeComesFromTheDtype) {
  using dt = dnnl::memory::data_type;
  EXPECT_EQ(ops::cpu::dnnl_type(DType::kF32), dt::f32);
  EXPECT_EQ(ops::cpu::dnnl_type(DType::kBF16), dt::bf16);
  EXPECT_EQ(ops::cpu::dnnl_type(DType::kF16), dt::f16);
  EXPECT_EQ(ops::cpu::dnnl_type(DType::kI32), dt::s32);
}

TEST(OpDtype, FactoriesTakeF32AndBf16Only) {
  const Device cpu = Device::kCpu;
  ops::ConvShape c{2, 6, 6, 3, 4, 3, 3};
  ops::LinearShape l{2, 3, 4};
  ops::PoolShape p{1, 4, 4, 2, 2, 2};
  ops::BatchNormShape b{1, 2, 2, 3};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    c.dtype = l.dtype = p.dtype = b.dtype = dt;
    EXPECT_NO_THROW(ops::make_conv2d(cpu, c, false)) << dtype_name(dt);
    EXPECT_NO_THROW(ops::make_linear(cpu, l, true)) << dtype_name(dt);
    EXPECT_NO_THROW(ops::make_max_pool2d(cpu, p)) << dtype_name(dt);
    EXPECT_NO_THROW(ops::make_batch_norm(cpu, b)) << dtype_name(dt);
  }
  c.dtype = DType::kF16;
  EXPECT_EQ(error_of([&] { ops::make_conv2d(cpu, c, false); }),
            "conv2d: dtype f16 is not supported by the CPU ops (f32 and bf16 only)");
  l.dtype = DType::kF16;
  EXPECT_EQ(error_of([&] { ops::make_linear(cpu, l, true); }),
            "linear: dtype f16 is not supported by the CPU ops (f32 and bf16 only)");
  p.dtype = DType::kI32;
  EXPECT_EQ(error_of([&] { ops::make_max_pool2d(cpu, p); }),
            "max_pool2d: dtype i32 is not supported by the CPU ops (f32 and bf16 only)");
  b.dtype = DType::kF16;
  EXPECT_EQ(error_of([&] { ops::make_batch_norm(cpu, b); }),
            "batch_norm: dtype f16 is not supported by the CPU ops (f32 and bf16 only)");
}

// A bf16 op takes bf16 activations and the f32 master weights: a bf16 weight
// (or gradient) is refused, and so is an f32 activation.
TEST(OpDtype, Bf16OpsWantF32Weights) {
  const DType bf = DType::kBF16;
  auto lin = ops::make_linear(Device::kCpu, {2, 3, 4, bf}, false);
  Tensor x = Tensor::zeros({2, 3}, bf), y = Tensor::zeros({2, 4}, bf);
  Tensor w = Tensor::zeros({4, 3}), wb = Tensor::zeros({4, 3}, bf), xf = Tensor::zeros({2, 3});
  EXPECT_NO_THROW(lin->forward(x, w, nullptr, y));
  EXPECT_EQ(error_of([&] { lin->forward(x, wb, nullptr, y); }),
            "linear forward: weight is bf16, expected f32");
  EXPECT_EQ(error_of([&] { lin->forward(xf, w, nullptr, y); }),
            "linear forward: src is f32, expected bf16");
  EXPECT_EQ(error_of([&] { lin->backward_weights(x, y, wb, nullptr, false); }),
            "linear backward_weights: dweight is bf16, expected f32");
  ops::ConvShape cs{1, 4, 4, 1, 1, 3, 3};
  cs.dtype = bf;
  auto conv = ops::make_conv2d(Device::kCpu, cs, false);
  Tensor cx = Tensor::zeros({1, 4, 4, 1}, bf), cy = Tensor::zeros({1, 2, 2, 1}, bf);
  Tensor cw = Tensor::zeros({1, 1, 3, 3}), cwb = Tensor::zeros({1, 1, 3, 3}, bf);
  EXPECT_NO_THROW(conv->forward(cx, cw, nullptr, cy));
  EXPECT_EQ(error_of([&] { conv->forward(cx, cwb, nullptr, cy); }),
            "conv2d forward: weight is bf16, expected f32");
}

TEST(OpDtype, F32OpsRejectOperandsOfAnotherDtype) {
  auto lin = ops::make_linear(Device::kCpu, {2, 3, 4}, false);
  Tensor x = Tensor::zeros({2, 3}), w = Tensor::zeros({4, 3}), y = Tensor::zeros({2, 4});
  Tensor xb = Tensor::zeros({2, 3}, DType::kBF16), yh = Tensor::zeros({2, 4}, DType::kF16);
  EXPECT_NO_THROW(lin->forward(x, w, nullptr, y));
  EXPECT_EQ(error_of([&] { lin->forward(xb, w, nullptr, y); }),
            "linear forward: src is bf16, expected f32");
  EXPECT_EQ(error_of([&] { lin->forward(x, w, nullptr, yh); }),
            "linear forward: dst is f16, expected f32");
  auto conv = ops::make_conv2d(Device::kCpu, {1, 4, 4, 1, 1, 3, 3}, false);
  Tensor cx = Tensor::zeros({1, 4, 4, 1}, DType::kBF16), cw = Tensor::zeros({1, 1, 3, 3});
  Tensor cy = Tensor::zeros({1, 2, 2, 1});
  EXPECT_EQ(error_of([&] { conv->forward(cx, cw, nullptr, cy); }),
            "conv2d forward: src is bf16, expected f32");
  auto pool = ops::make_max_pool2d(Device::kCpu, {1, 4, 4, 1, 2, 2});
  EXPECT_EQ(error_of([&] { pool->forward(cx, cy); }),
            "max_pool2d forward: src is bf16, expected f32");
  // A device tensor never reaches a CPU kernel.
  Tensor on_gpu = Tensor::view(x.data(), {2, 3}, DType::kF32, nullptr, Device::kCuda);
  EXPECT_EQ(error_of([&] { lin->forward(on_gpu, w, nullptr, y); }),
            "linear forward: src is on cuda, the op runs on cpu");
}

TEST(OpDtype, BatchNormKeepsItsVectorsF32) {
  ops::BatchNormShape s{1, 2, 2, 3};
  auto bn = ops::make_batch_norm(Device::kCpu, s);
  Tensor x = Tensor::zeros({1, 2, 2, 3}), y = Tensor::zeros({1, 2, 2, 3});
  Tensor v = Tensor::zeros({3}), vb = Tensor::zeros({3}, DType::kBF16);
  EXPECT_NO_THROW(bn->forward_train(x, v, v, y, v, v));
  EXPECT_EQ(error_of([&] { bn->forward_train(x, vb, v, y, v, v); }),
            "batch_norm forward_train: gamma is bf16, expected f32");
}

TEST(OpDtype, ElementwiseOpsNameThemselves) {
  Tensor a = Tensor::zeros({8}), h = Tensor::zeros({8}, DType::kF16);
  Tensor b = Tensor::zeros({8}, DType::kBF16);
  EXPECT_EQ(error_of([&] { ops::relu_forward(h, a, 8); }),
            "relu forward: dtype f16 is not supported by the CPU ops (f32 and bf16 only)");
  EXPECT_EQ(error_of([&] { ops::add(a, a, h, 8); }), "add: dst is f16, expected f32");
  EXPECT_EQ(error_of([&] { ops::add(b, a, b, 8); }), "add: b is f32, expected bf16");
  EXPECT_EQ(
      error_of([&] { ops::global_avg_pool_forward(h, a, 1, 4, 2); }),
      "global_avg_pool forward: dtype f16 is not supported by the CPU ops (f32 and bf16 only)");
  // Dropout masks stay f32 under bf16 data.
  EXPECT_NO_THROW(ops::dropout_apply(b, a, b, 8));
  EXPECT_EQ(error_of([&] { ops::dropout_apply(b, b, b, 8); }),
            "dropout: mask is bf16, expected f32");
}

// A transpose only moves elements, so it serves every dtype (its reorder is
// built from the dtype and cached per dtype).
TEST(OpDtype, TransposeMovesAnyDtype) {
  const int64_t n = 1, h = 2, w = 3, c = 2;
  Tensor src = Tensor::empty({n, h, w, c}, DType::kI32);
  Tensor dst = Tensor::zeros({n, c, h, w}, DType::kI32);
  for (int i = 0; i < 12; ++i) src.i32()[i] = i;
  ops::nhwc_to_nchw(src, dst, n, h, w, c);
  // dst[c][y][x] = src[y][x][c]
  for (int64_t k = 0; k < c; ++k)
    for (int64_t p = 0; p < h * w; ++p) EXPECT_EQ(dst.i32()[k * h * w + p], int32_t(p * c + k));
  Tensor f = Tensor::zeros({n, c, h, w});
  EXPECT_EQ(error_of([&] { ops::nhwc_to_nchw(src, f, n, h, w, c); }),
            "nhwc_to_nchw: dst is f32, expected i32");
}

}  // namespace
}  // namespace cohort
