// Targeted tests of the transformer ops beside the harness's table: the
// attention is causal (forward and backward), embedding ids are checked,
// GELU's backward runs in place, and operands of the wrong dtype are named.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/harness.h"
#include "ops/layer_norm.h"
#include "support/support.h"

namespace cohort::op_harness {
namespace {

using testing_support::error_of;

// A tensor of `dtype` holding v's values (bf16: rounded).
Tensor tensor_of(const Vec& v, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  if (dtype == DType::kBF16)
    f32_to_bf16(v.data(), t.bf16(), v.size());
  else
    std::copy(v.begin(), v.end(), t.f32());
  return t;
}

Vec values_of(const Tensor& t) {
  Vec v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kBF16)
    bf16_to_f32(t.bf16(), v.data(), v.size());
  else
    std::copy(t.f32(), t.f32() + t.numel(), v.begin());
  return v;
}

TEST(OpAttention, IsCausal) {
  // Changing token t's q, k and v changes no output before t, nor the other
  // sequence's; and a gradient at position t reaches no token after it.
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Rng rng(31);
    const ops::AttentionShape s{2, 6, 12, 3, dt};
    const int64_t T = s.t, C = s.c, t0 = 3;
    auto op = ops::make_attention(Device::kCpu, s);
    Vec qkv = randn(s.b * T * 3 * C, rng);
    Tensor x = tensor_of(qkv, {s.b, T, 3 * C}, dt), y = Tensor::zeros({s.b, T, C}, dt);
    op->forward(x, y);
    const Vec y0 = values_of(y);
    for (int64_t k = 0; k < 3 * C; ++k) qkv[size_t(t0 * 3 * C + k)] += 1.0f;  // (b 0, t t0)
    x = tensor_of(qkv, {s.b, T, 3 * C}, dt);
    op->forward(x, y);
    const Vec y1 = values_of(y);
    for (int64_t t = 0; t < T; ++t) {
      bool same = true;
      for (int64_t k = 0; k < C; ++k) same = same && y0[size_t(t * C + k)] == y1[size_t(t * C + k)];
      EXPECT_EQ(same, t < t0) << dtype_name(dt) << " position " << t;
    }
    EXPECT_TRUE(std::equal(y0.begin() + T * C, y0.end(), y1.begin() + T * C))
        << dtype_name(dt) << " the other sequence changed";

    Vec dout(static_cast<size_t>(s.b * T * C), 0.0f);
    for (int64_t k = 0; k < C; ++k) dout[size_t(t0 * C + k)] = 1.0f;
    Tensor dy = tensor_of(dout, {s.b, T, C}, dt), dx = Tensor::zeros({s.b, T, 3 * C}, dt);
    op->backward(x, dy, dx);
    const Vec dqkv = values_of(dx);
    for (size_t i = size_t((t0 + 1) * 3 * C); i < dqkv.size(); ++i)
      ASSERT_EQ(dqkv[i], 0.0f) << dtype_name(dt) << " gradient reached element " << i;
    EXPECT_GT(ref::max_abs(dqkv.data(), t0 * 3 * C), 0.0) << "no gradient before t";
  }
}

TEST(OpEmbedding, RejectsAnOutOfRangeId) {
  const ops::EmbeddingShape s{2, 3, 4, 7, 5};
  Tensor wte = Tensor::zeros({7, 4}), wpe = Tensor::zeros({5, 4}), y = Tensor::zeros({2, 3, 4});
  std::vector<int32_t> ids = {0, 1, 2, 3, 4, 6};
  EXPECT_NO_THROW(ops::embedding_forward(s, ids.data(), wte, wpe, y));
  ids[5] = 7;
  EXPECT_THROW(ops::embedding_forward(s, ids.data(), wte, wpe, y), InputError);
  EXPECT_EQ(error_of([&] { ops::embedding_forward(s, ids.data(), wte, wpe, y); }),
            "embedding forward: token id 7 at position (b 1, t 2) is outside the vocabulary [0, 7)");
  ids[5] = 0;
  ids[1] = -1;
  EXPECT_EQ(error_of([&] { ops::embedding_backward(s, ids.data(), y, wte, wpe, false); }),
            "embedding backward: token id -1 at position (b 0, t 1) is outside the vocabulary [0, 7)");
  ids[1] = 1;
  ops::EmbeddingShape long_seq = s;
  long_seq.max_t = 2;
  EXPECT_EQ(error_of([&] { ops::embedding_forward(long_seq, ids.data(), wte, wpe, y); }),
            "embedding forward: sequence length 3 exceeds the position table's 2 rows");
}

TEST(OpGelu, BackwardInPlace) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Rng rng(32);
    const int64_t n = 300;
    Tensor x = tensor_of(randn(n, rng, 2.0f), {n}, dt), g = tensor_of(randn(n, rng), {n}, dt);
    Tensor dx = Tensor::zeros({n}, dt);
    ops::gelu_backward(g, x, dx, n);
    ops::gelu_backward(g, x, g, n);  // dsrc aliases ddst
    EXPECT_EQ(values_of(g), values_of(dx)) << dtype_name(dt);
  }
}

TEST(OpDtype, TransformerOpsNameOpAndOperand) {
  const Device cpu = Device::kCpu;
  const DType bf = DType::kBF16;
  EXPECT_EQ(error_of([&] { ops::make_layer_norm(cpu, {4, 8, 1e-5f, DType::kF16}); }),
            "layer_norm: dtype f16 is not supported by the CPU ops (f32 and bf16 only)");
  EXPECT_EQ(error_of([&] { ops::make_attention(cpu, {1, 2, 8, 2, DType::kI32}); }),
            "attention: dtype i32 is not supported by the CPU ops (f32 and bf16 only)");
  auto ln = ops::make_layer_norm(cpu, {4, 8, 1e-5f, bf});
  Tensor x = Tensor::zeros({4, 8}, bf), xf = Tensor::zeros({4, 8});
  Tensor v = Tensor::zeros({8}), vb = Tensor::zeros({8}, bf);
  EXPECT_NO_THROW(ln->forward(x, v, v, x));
  EXPECT_EQ(error_of([&] { ln->forward(x, vb, v, x); }),
            "layer_norm forward: gamma is bf16, expected f32");
  EXPECT_EQ(error_of([&] { ln->backward(x, xf, v, x, v, v, false); }),
            "layer_norm backward: ddst is f32, expected bf16");
  auto att = ops::make_attention(cpu, {1, 2, 8, 2, bf});
  Tensor qkv = Tensor::zeros({1, 2, 24}, bf), out = Tensor::zeros({1, 2, 8});
  EXPECT_EQ(error_of([&] { att->forward(qkv, out); }),
            "attention forward: out is f32, expected bf16");
  const ops::EmbeddingShape es{1, 2, 8, 3, 2, bf};
  const int32_t ids[] = {0, 1};
  Tensor wte = Tensor::zeros({3, 8}), wpe = Tensor::zeros({2, 8}), e = Tensor::zeros({1, 2, 8}, bf);
  EXPECT_NO_THROW(ops::embedding_forward(es, ids, wte, wpe, e));
  EXPECT_EQ(error_of([&] { ops::embedding_backward(es, ids, e, e, wpe, false); }),
            "embedding backward: dwte is bf16, expected f32");
  EXPECT_EQ(error_of([&] { ops::gelu_forward(x, xf, 32); }), "gelu forward: dst is f32, expected bf16");
}

}  // namespace
}  // namespace cohort::op_harness
