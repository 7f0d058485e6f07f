#include <gtest/gtest.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace cohort {

TEST(Tensor, ReshapeAndSliceShareMemory) {
  Tensor t = Tensor::empty({4, 3});
  for (int i = 0; i < 12; ++i) t.f32()[i] = float(i);
  Tensor s = t.slice(1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.f32()[0], 3.0f);
  EXPECT_EQ(t.reshape({12}).f32()[11], 11.0f);
  EXPECT_THROW(t.reshape({5}), Error);
}

TEST(Tensor, Bf16RoundTrip) {
  Tensor a = Tensor::empty({3});
  a.f32()[0] = 1.0f;
  a.f32()[1] = -3.140625f;  // exactly representable in bf16
  a.f32()[2] = 1.00390625f; // halfway between two bf16 values: rounds to even (1.0)
  Tensor b = Tensor::empty({3}, DType::kBF16);
  b.copy_from(a);
  Tensor c = Tensor::empty({3});
  c.copy_from(b);
  EXPECT_EQ(c.f32()[0], 1.0f);
  EXPECT_EQ(c.f32()[1], -3.140625f);
  EXPECT_EQ(c.f32()[2], 1.0f);
}

TEST(Arena, ViewsAreContiguousRanges) {
  Arena arena;
  Tensor w, dw, b, db;
  arena.add("fc.weight", {3, 2}, &w, &dw);
  arena.add("fc.bias", {3}, &b, &db);
  arena.allocate();
  EXPECT_EQ(arena.size(), 9);
  EXPECT_EQ(b.f32(), arena.params().f32() + 6);
  EXPECT_EQ(db.f32(), arena.grads().f32() + 6);
  EXPECT_EQ(arena.infos()[1].offset, 6);
}

TEST(Arena, TiedParameterSharesValuesAndGradientSlot) {
  Arena arena;
  Tensor wte, dwte, head, dhead, b, db;
  arena.add("wte.weight", {4, 3}, &wte, &dwte);
  arena.add("ln.bias", {3}, &b, &db);
  arena.tie("lm_head.weight", "wte.weight", {4, 3}, &head, &dhead);
  EXPECT_THROW(arena.tie("x", "wte.weight", {5}, nullptr, nullptr), Error);  // 5 != 12
  EXPECT_THROW(arena.tie("x", "nope", {12}, nullptr, nullptr), Error);
  arena.allocate();
  // No new elements: the layout, and so checkpoints and optimizers, see the owner only.
  EXPECT_EQ(arena.size(), 15);
  EXPECT_EQ(arena.infos().size(), 2u);
  ASSERT_EQ(arena.ties().size(), 1u);
  EXPECT_EQ(arena.ties()[0].owner, 0u);
  EXPECT_EQ(arena.find("lm_head.weight"), 0u);
  EXPECT_EQ(head.data(), wte.data());
  EXPECT_EQ(dhead.data(), dwte.data());
  EXPECT_EQ(head.shape(), (Shape{4, 3}));
  wte.f32()[5] = 2.0f;
  EXPECT_EQ(head.f32()[5], 2.0f);
  // Backward: the head writes its gradient, the embedding adds into the same slot.
  for (int i = 0; i < 12; ++i) dhead.f32()[i] = 1.0f;
  for (int i = 0; i < 12; ++i) dwte.f32()[i] += 0.5f * float(i);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(arena.grad(0).f32()[i], 1.0f + 0.5f * float(i));
  // A second set of modules over the same arenas binds its ties too.
  Arena view;
  Tensor w2, dw2, b2, db2, h2, dh2;
  view.add("wte.weight", {4, 3}, &w2, &dw2);
  view.add("ln.bias", {3}, &b2, &db2);
  view.tie("lm_head.weight", "wte.weight", {12}, &h2, &dh2);
  view.share(arena);
  EXPECT_EQ(h2.data(), wte.data());
  EXPECT_EQ(h2.shape(), (Shape{12}));
}

TEST(Rng, DeterministicAndInRange) {
  Rng a(42), b(42);
  for (int i = 0; i < 100; ++i) {
    float u = a.uniform();
    EXPECT_EQ(u, b.uniform());
    EXPECT_GE(u, 0.0f);
    EXPECT_LT(u, 1.0f);
  }
}

}  // namespace cohort
