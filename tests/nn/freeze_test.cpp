// Fine-tuning with frozen layers (nn::Model::freeze): a step leaves the
// frozen prefix bit-identical, its batch-norm statistics too, computes none
// of its gradients, keeps no optimizer state for it, and matches PyTorch's
// step with requires_grad=False and .eval() on the same backbone; data
// parallelism sums only the trainable range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "comm/loopback.h"
#include "data/dataset.h"
#include "nn/models/zoo.h"
#include "parallel/data_parallel.h"
#include "support/support.h"
#include "train/checkpoint.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

// conv1-bn1 stem, layer1 = one residual block, layer2 = conv-bn, average
// pool, fc: batch-norm in the backbone, a nested layer to freeze up to.
std::shared_ptr<const nn::ModelSpec> small_net() {
  auto s = std::make_shared<nn::ModelSpec>();
  s->name = "freeze-net";
  s->input = nn::InputSpec::image(8, 8, 3);
  s->classes = 5;
  s->head = "fc";
  s->layers = [] {
    using namespace nn;
    auto net = std::make_unique<Sequential>();
    net->add<Conv2d>("conv1", 3, 8, 3, 1, 1, false).add<BatchNorm2d>("bn1", 8, true);
    auto layer1 = std::make_unique<Sequential>();
    layer1->add("0", basic_block(8, 8, 1));
    net->add("layer1", std::move(layer1));
    auto layer2 = std::make_unique<Sequential>();
    layer2->add<Conv2d>("0", 8, 16, 3, 2, 1, false).add<BatchNorm2d>("1", 16, true);
    net->add("layer2", std::move(layer2));
    net->add<GlobalAvgPool>("avgpool").add<Linear>("fc", 16, 5);
    return net;
  };
  return s;
}

std::vector<float> copy_of(const Tensor& t) {
  return std::vector<float>(t.f32(), t.f32() + t.numel());
}

TEST(Freeze, BackboneIsTheArenaPrefixBeforeTheHead) {
  auto m = nn::build_model(small_net(), 1);
  m->freeze("backbone");
  const auto& infos = m->params().infos();
  EXPECT_EQ(m->frozen_params(), infos[infos.size() - 2].offset);  // fc.weight's
  EXPECT_EQ(infos[infos.size() - 2].name, "fc.weight");
  auto up_to = nn::build_model(small_net(), 1);
  up_to->freeze("layer1");  // conv1, bn1 and layer1: layer2.0.weight is the first trainable
  int64_t layer2 = -1;
  for (const auto& i : infos)
    if (i.name == "layer2.0.weight") layer2 = i.offset;
  EXPECT_EQ(up_to->frozen_params(), layer2);
  auto block = nn::build_model(small_net(), 1);
  block->freeze("layer1.0");  // a dotted name inside a container
  EXPECT_EQ(block->frozen_params(), layer2);
}

TEST(Freeze, RefusesUnknownLayersAndFreezingEverything) {
  using testing_support::error_of;
  auto m = nn::build_model(small_net(), 1);
  const std::string e = error_of([&] { m->freeze("layer9"); });
  EXPECT_NE(e.find("--freeze"), std::string::npos) << e;
  EXPECT_NE(e.find("'layer9'"), std::string::npos) << e;
  EXPECT_NE(e.find("layer2"), std::string::npos) << e;  // the valid names
  auto all = nn::build_model(small_net(), 1);
  EXPECT_EQ(error_of([&] { all->freeze("fc"); }),
            "--freeze fc leaves model freeze-net nothing to train");
}

// One SGD step with momentum: frozen weights and batch-norm statistics keep
// their bits, their gradients are never written (the NaN sentinels stay),
// the optimizer holds state for the head's range only.
TEST(Freeze, StepLeavesTheFrozenPrefixAndItsGradientsAlone) {
  auto m = nn::build_model(small_net(), 3);
  m->freeze("layer1");
  const int64_t f = m->frozen_params();
  Arena& a = m->params();
  const std::vector<float> before = copy_of(a.params()), stats = copy_of(m->buffers().params());
  std::fill(a.grads().f32(), a.grads().f32() + f, std::numeric_limits<float>::quiet_NaN());
  auto opt = make_optimizer("sgd", 0, 0.9f);
  LocalStep step(*m, *opt, 0);
  const Dataset d = make_synthetic(6, 8, 8, 3, 5, 4);
  step.run(d, 0.1f);
  EXPECT_EQ(std::memcmp(a.params().f32(), before.data(), size_t(f) * 4), 0);
  for (int64_t i = 0; i < f; ++i) ASSERT_TRUE(std::isnan(a.grads().f32()[i])) << i;
  ASSERT_EQ(opt->state().size(), 1u);
  EXPECT_EQ(opt->state()[0]->numel(), a.size() - f);
  // The frozen bn1's statistics stayed; layer2's trainable batch-norm moved.
  const auto& bufs = m->buffers().infos();
  for (size_t i = 0; i < bufs.size(); ++i) {
    const Tensor now = m->buffers().param(i);
    const bool same = std::memcmp(now.f32(), stats.data() + bufs[i].offset, size_t(now.numel()) * 4) == 0;
    EXPECT_EQ(same, bufs[i].name.rfind("layer2", 0) != 0) << bufs[i].name;
  }
  bool head_moved = false;
  for (int64_t i = f; i < a.size(); ++i) head_moved |= a.params().f32()[i] != before[size_t(i)];
  EXPECT_TRUE(head_moved);
}

// Data parallelism on the loopback communicator, which counts what goes on
// the wire: only the trainable range's bytes (a ring at 2 ranks sends n
// elements' worth per step), and the frozen prefix keeps its bits. (Equality
// with one process under real ranks: tests/train/finetune_test.cpp.)
TEST(Freeze, DataParallelSendsOnlyTheTrainableBytes) {
  const Dataset d = make_synthetic(6, 8, 8, 3, 5, 4);
  auto ranked = nn::build_model(small_net(), 3);
  ranked->freeze("backbone");
  const int64_t f = ranked->frozen_params();
  const std::vector<float> before = copy_of(ranked->params().params());
  auto o2 = make_optimizer("sgd", 0, 0.9f);
  comm::Loopback wire;
  DataParallelConfig cfg;
  cfg.algorithm = comm::Algorithm::kRing;
  DataParallel dp(wire, *ranked, *o2, cfg, 0);
  StepTimes times;
  for (int s = 0; s < 2; ++s) dp.step(d, 0.1f, times);
  const int64_t trainable = ranked->num_params() - f;
  EXPECT_EQ(wire.sent, size_t(2 * trainable) * sizeof(float));
  EXPECT_EQ(dp.optimizer_range(), ranked->trainable());
  EXPECT_EQ(std::memcmp(ranked->params().params().f32(), before.data(), size_t(f) * 4), 0);
}

// Two SGD-momentum steps with the backbone frozen, against PyTorch doing the
// same with requires_grad=False and .eval() on the backbone: the backbone
// bit-identical, the head within 1e-5.
// A frozen conv followed by its frozen batch-norm runs as one conv with the
// norm folded in (nn::Conv2d::fold); the logits equal those of the unfolded
// model in eval mode, and the arena's weights stay untouched.
TEST(Freeze, FoldedBatchNormGivesTheEvalModeLogits) {
  auto m = nn::build_model(small_net(), 5);
  float* stats = m->buffers().params().f32();
  for (int64_t i = 0; i < m->buffers().size(); ++i) stats[i] = 0.5f + 0.01f * float(i % 37);
  const Dataset d = make_synthetic(6, 8, 8, 3, 5, 4);
  nn::Context eval;
  eval.training = false;
  const std::vector<float> expected = copy_of(m->forward(d.images, eval));
  const std::vector<float> weights = copy_of(m->params().params());
  m->freeze("backbone");
  nn::Context train;  // frozen layers run in eval mode while the model trains
  for (int pass = 0; pass < 2; ++pass) {  // the second reuses the laid-out weights
    const std::vector<float> got = copy_of(m->forward(d.images, train));
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], expected[i], 1e-5f * (1.0f + std::fabs(expected[i]))) << i;
  }
  EXPECT_EQ(copy_of(m->params().params()), weights);
}

TEST(Freeze, BackboneStepMatchesPyTorch) {
  const fs::path dir = fs::path(testing::TempDir()) / "cohort_freeze_torch";
  fs::create_directories(dir);
  auto m = nn::build_model(small_net(), 5);
  // Non-trivial running statistics, as a pretrained backbone has.
  float* stats = m->buffers().params().f32();
  for (int64_t i = 0; i < m->buffers().size(); ++i) stats[i] = 0.5f + 0.01f * float(i % 37);
  const std::string before = (dir / "before.safetensors").string();
  save_checkpoint(before, m->name(), m->params(), &m->buffers(), {});
  m->freeze("backbone");
  auto opt = make_optimizer("sgd", 0, 0.9f);
  LocalStep step(*m, *opt, 0);
  const Dataset d = make_synthetic(6, 8, 8, 3, 5, 4);
  step.run(d, 0.1f);
  step.run(d, 0.1f);
  Tensor labels = Tensor::empty({6});
  for (int i = 0; i < 6; ++i) labels.f32()[i] = float(d.labels[size_t(i)]);
  std::vector<NamedTensor> io = {{"x", d.images}, {"labels", labels}};
  const std::string after = (dir / "after.safetensors").string();
  save_checkpoint(after, m->name(), m->params(), &m->buffers(), {}, io);
  testing_support::expect_pytorch_script(dir.string(), after, R"(
import torch.nn as nn
before = {}
raw = open(sys.argv[2], 'rb').read()
(n,) = struct.unpack('<Q', raw[:8])
h = json.loads(raw[8:8 + n]); h.pop('__metadata__', None)
for k, e in h.items():
    if e['dtype'] != 'F32':  # num_batches_tracked (I64)
        continue
    b, end = e['data_offsets']
    before[k] = torch.frombuffer(bytearray(raw[8 + n + b:8 + n + end]), dtype=torch.float32).reshape(e['shape'])
class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.conv1 = nn.Conv2d(8, 8, 3, 1, 1, bias=False); s.bn1 = nn.BatchNorm2d(8)
        s.conv2 = nn.Conv2d(8, 8, 3, 1, 1, bias=False); s.bn2 = nn.BatchNorm2d(8)
    def forward(s, x):
        y = s.bn2(s.conv2(torch.relu(s.bn1(s.conv1(x)))))
        return torch.relu(y + x)
class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False); s.bn1 = nn.BatchNorm2d(8)
        s.layer1 = nn.Sequential(Block())
        s.layer2 = nn.Sequential(nn.Conv2d(8, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        s.fc = nn.Linear(16, 5)
    def forward(s, x):
        x = s.layer2(s.layer1(torch.relu(s.bn1(s.conv1(x)))))
        return s.fc(x.mean((2, 3)))
net = Net()
state = {k: before[k] for k in net.state_dict() if k in before}
missing = net.load_state_dict(state, strict=False).missing_keys
assert all(k.endswith('num_batches_tracked') for k in missing), missing
for name, p in net.named_parameters():
    p.requires_grad = not name.startswith(('conv1', 'bn1', 'layer1', 'layer2'))
net.train()
for mod in (net.conv1, net.bn1, net.layer1, net.layer2):
    mod.eval()
opt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.1, momentum=0.9)
x = t['x'].permute(0, 3, 1, 2).contiguous()
y = t['labels'].long()
for _ in range(2):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(x), y).backward()
    opt.step()
ref = net.state_dict()
for k, v in ref.items():
    if k.endswith('num_batches_tracked'):
        continue
    mine = t[k]
    if k.startswith('fc.'):
        err = (mine - v).abs().max().item() / max(v.abs().max().item(), 1e-12)
        assert err <= 1e-5, (k, err)
    else:
        assert torch.equal(mine, before[k]), ('cohort moved frozen', k)
        assert torch.equal(v, before[k]), ('torch moved frozen', k)
print('freeze step matches PyTorch')
)",
                                         before);
}

}  // namespace
}  // namespace cohort
