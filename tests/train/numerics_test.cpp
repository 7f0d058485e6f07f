// cohort against PyTorch: from the same weights and the same batch, the loss
// and every parameter's gradient agree to 1e-4 relative. Runs whenever
// Debian's python3-torch is installed; skips with the reason otherwise.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "bench/peer.h"
#include "data/dataset.h"
#include "nn/models/zoo.h"
#include "ops/loss.h"
#include "train/checkpoint.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

void compare_with_pytorch(const std::string& name) {
  ASSERT_TRUE(peer_available()) << "python3-torch not importable by " << peer_python()
                                << " (scripts/setup.sh installs it)";
  const fs::path dir = fs::temp_directory_path() / ("cohort_numerics_" + name);
  fs::create_directories(dir);
  auto model = nn::make_model(name, 3);
  const int64_t n = 16;
  Dataset d = make_synthetic(n, 28, 28, 1, 10, 11);
  Tensor labels = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) labels.f32()[i] = float(d.labels[size_t(i)]);
  save_checkpoint((dir / "w.safetensors").string(), name, model->params(), nullptr, {});
  save_safetensors((dir / "x.safetensors").string(), {{"images", d.images}, {"labels", labels}},
                   {});

  // Dropout off on both sides (PyTorch's eval()); these models have no batch-norm.
  nn::Context ctx;
  ctx.training = false;
  const Tensor& logits = model->forward(d.images, ctx);
  Tensor dlogits = Tensor::empty(logits.shape());
  auto loss = ops::softmax_cross_entropy(logits.f32(), d.labels.data(), n, 10, dlogits.f32(),
                                         1.0f / float(n));
  model->backward(dlogits, ctx);

  run_peer({"grads", "--model", name, "--weights", (dir / "w.safetensors").string(),
            "--batch-file", (dir / "x.safetensors").string(), "--out",
            (dir / "g.safetensors").string()});
  auto ref = load_safetensors((dir / "g.safetensors").string());
  const Tensor* ref_loss = ref.find("loss");
  ASSERT_NE(ref_loss, nullptr);
  const double mean_loss = loss.loss_sum / double(n);
  EXPECT_NEAR(mean_loss, ref_loss->f32()[0], 1e-4 * std::fabs(ref_loss->f32()[0]));

  const Arena& a = model->params();
  for (size_t i = 0; i < a.infos().size(); ++i) {
    const std::string& pname = a.infos()[i].name;
    const Tensor* g = ref.find(pname);
    ASSERT_NE(g, nullptr) << pname;
    Tensor mine = a.grad(i);
    ASSERT_EQ(g->numel(), mine.numel()) << pname;
    double max_diff = 0, max_ref = 0;
    for (int64_t k = 0; k < mine.numel(); ++k) {
      max_diff = std::max(max_diff, double(std::fabs(mine.f32()[k] - g->f32()[k])));
      max_ref = std::max(max_ref, double(std::fabs(g->f32()[k])));
    }
    EXPECT_LE(max_diff, 1e-4 * max_ref) << name << " gradient of " << pname;
  }
  fs::remove_all(dir);
}

TEST(NumericsVsPyTorch, MnistSmall) { compare_with_pytorch("mnist-small"); }
TEST(NumericsVsPyTorch, Lenet) { compare_with_pytorch("lenet"); }

}  // namespace
}  // namespace cohort
