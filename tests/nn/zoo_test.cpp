// The model zoo: every model's parameter count, forward shape, and
// Context::grad_ready's announcements during backward (which data
// parallelism's buckets rely on); the names the zoo lists.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "nn/grad_check.h"
#include "nn/models/zoo.h"
#include "support/support.h"

namespace cohort {
namespace {

using grad_check::randn;

// ------------------------------------------------------------------ the zoo

struct ZooCase {
  std::string name;
  int64_t params;   // expected parameter count
  int64_t batch;    // forward batch
  bool inference;   // also run the inference forward
  bool backward;    // also check grad_ready over a backward
};

// Backward announces [0, num_params) exactly once, as non-overlapping ranges in
// decreasing order (the order backward finishes them).
void check_grad_ready(nn::Model& m, const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  const std::string& name = m.name();
  ASSERT_FALSE(ranges.empty()) << name;
  int64_t expect_end = m.num_params();
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto [b, e] = ranges[i];
    EXPECT_LT(b, e) << name << ": empty range #" << i;
    EXPECT_EQ(e, expect_end) << name << ": announcement #" << i << " [" << b << ", " << e
                             << ") does not continue downward from " << expect_end;
    expect_end = b;
  }
  EXPECT_EQ(expect_end, 0) << name << ": announcements do not reach offset 0";
  int64_t covered = 0;
  for (auto [b, e] : ranges) covered += e - b;
  EXPECT_EQ(covered, m.num_params()) << name << ": " << ranges.size()
                                     << " announcements cover " << covered << " elements";
}

void PrintTo(const ZooCase& c, std::ostream* os) { *os << c.name; }

class ZooTest : public ::testing::TestWithParam<ZooCase> {};

TEST_P(ZooTest, CountsForwardAndGradReady) {
  const ZooCase& c = GetParam();
  auto m = nn::make_model(c.name, 3);
  std::printf("  %-12s %12lld parameters, %8.3f GFLOP/image forward\n", c.name.c_str(),
              static_cast<long long>(m->num_params()), m->forward_flops_per_image() / 1e9);
  EXPECT_EQ(m->num_params(), c.params);
  EXPECT_EQ(m->num_classes(), 10);
  // The arena holds every registered parameter, contiguously and in order.
  int64_t off = 0;
  for (const auto& info : m->params().infos()) {
    EXPECT_EQ(info.offset, off) << info.name;
    off += info.numel();
  }
  EXPECT_EQ(off, c.params);
  EXPECT_EQ(m->params().params().numel(), c.params);
  if (c.name == "cifar-resnet50") {  // torchvision names, so checkpoints map onto PyTorch's
    std::vector<std::string> names;
    for (const auto& info : m->params().infos()) names.push_back(info.name);
    for (const char* n : {"conv1.weight", "bn1.weight", "layer1.0.conv1.weight",
                          "layer1.0.downsample.0.weight", "layer1.0.downsample.1.bias",
                          "layer4.2.bn3.bias", "fc.weight", "fc.bias"})
      EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }

  Shape xs = m->input_shape();
  xs.insert(xs.begin(), c.batch);
  Rng rng(41);
  Tensor x = randn(xs, rng);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  nn::Context ctx;
  ctx.training = true;
  ctx.rng = &rng;
  ctx.grad_ready = [&](int64_t b, int64_t e) { ranges.emplace_back(b, e); };
  auto finite = [](const Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(t.f32()[i])) return false;
    return true;
  };
  const Tensor& y = m->forward(x, ctx);
  EXPECT_EQ(y.shape(), (Shape{c.batch, 10}));
  EXPECT_TRUE(finite(y)) << "training forward";
  if (c.backward) {
    Tensor dy = randn(y.shape(), rng);
    m->backward(dy, ctx);
    check_grad_ready(*m, ranges);
    EXPECT_TRUE(finite(m->params().grads())) << "gradients";
  }
  if (c.inference) {  // running statistics, no dropout
    ctx.training = false;
    const Tensor& yi = m->forward(x, ctx);
    EXPECT_EQ(yi.shape(), (Shape{c.batch, 10}));
    EXPECT_TRUE(finite(yi)) << "inference forward";
  }
}

// cifar-vgg16: VGG-16-BN for CIFAR, 13 convs + BN and a single 512->10 classifier.
// cifar-resnets: CIFAR stem (3x3, no bias, no max-pool), 10 classes: torchvision's
// ImageNet counts minus the 1000-way fc and the 7x7 stem's extra 7,680 weights.
INSTANTIATE_TEST_SUITE_P(
    ModuleZoo, ZooTest,
    ::testing::Values(ZooCase{"mnist-small", 402442, 2, true, true},
                      ZooCase{"lenet", 21840, 2, true, true},
                      ZooCase{"mnist-large", 2007050, 2, true, true},
                      ZooCase{"cifar-vgg16", 14728266, 2, true, true},
                      // ResNets nest Sequentials (layer1..4 hold the blocks).
                      ZooCase{"cifar-resnet50", 23520842, 2, true, true},
                      ZooCase{"cifar-resnet101", 42512970, 2, false, false},
                      ZooCase{"cifar-resnet152", 58156618, 1, false, false}),
    [](const ::testing::TestParamInfo<ZooCase>& info) {
      std::string s = info.param.name;
      std::replace(s.begin(), s.end(), '-', '_');
      return s;
    });

// torchvision's architectures take any size from 32x32 (adaptive pooling): a
// training forward and backward at 32x32 announces every range once; the
// spec's size and class count follow with_image and with_classes, and a
// fixed-size model or a smaller image is refused naming what gave the size.
TEST(ModuleZooTorchvision, AnySizeAndClassCount) {
  auto spec = nn::with_image(nn::with_classes(nn::find_model("resnet18"), 7), 32, 32, "--data x");
  EXPECT_EQ(spec->input.shape, (Shape{32, 32, 3}));
  EXPECT_EQ(spec->head, "fc");
  auto m = nn::build_model(spec, 3);
  EXPECT_EQ(m->num_params(), 11689512 - 513 * 1000 + 513 * 7);  // torchvision's, head of 7
  Rng rng(41);
  Tensor x = randn({2, 32, 32, 3}, rng);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  nn::Context ctx;
  ctx.grad_ready = [&](int64_t b, int64_t e) { ranges.emplace_back(b, e); };
  const Tensor& y = m->forward(x, ctx);
  EXPECT_EQ(y.shape(), (Shape{2, 7}));
  m->backward(randn(y.shape(), rng), ctx);
  check_grad_ready(*m, ranges);
  EXPECT_EQ(nn::find_model("vgg16_bn")->head, "classifier.6");
  const std::string small = testing_support::error_of([] {
    nn::with_image(nn::find_model("vgg16"), 28, 28, "--data mnist");
  });
  EXPECT_NE(small.find("--data mnist gives 28x28"), std::string::npos) << small;
  const std::string fixed = testing_support::error_of([] {
    nn::with_image(nn::find_model("cifar-resnet50"), 64, 64, "--data x");
  });
  EXPECT_NE(fixed.find("takes [32,32,3] only"), std::string::npos) << fixed;
  EXPECT_THROW(nn::with_classes(nn::find_model("gpt2-tiny"), 10), InputError);
}

TEST(ModuleZooNames, ListAndUnknownModel) {
  std::vector<std::string> names;
  for (const auto& s : nn::model_zoo()) names.push_back(s->name);
  EXPECT_EQ(names, (std::vector<std::string>{"mnist-small", "mnist-large", "lenet",
                                             "cifar-vgg16", "cifar-resnet50", "cifar-resnet101",
                                             "cifar-resnet152", "resnet18", "resnet50",
                                             "resnet101", "resnet152", "vgg16", "vgg16_bn",
                                             "gpt2-tiny",
                                             "gpt2", "gpt2-medium", "gpt2-large"}));
  EXPECT_THROW(nn::make_model("resnet34"), InputError);
  // torchvision parameter names, so checkpoints map onto PyTorch's.
  auto m = nn::make_model("mnist-small");
  std::vector<std::string> params;
  for (const auto& i : m->params().infos()) params.push_back(i.name);
  EXPECT_EQ(params, (std::vector<std::string>{"conv1.weight", "conv1.bias", "fc1.weight",
                                              "fc1.bias", "fc2.weight", "fc2.bias"}));
}

}  // namespace
}  // namespace cohort
