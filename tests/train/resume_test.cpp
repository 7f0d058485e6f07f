// Run checkpoints at the library level (train/resume.h): what --save writes,
// that --resume gives back the weights, the optimizer's state and step count
// and the run's position, that --load takes the weights only, and that a bad
// file is a one-line InputError that changes nothing.
#include "train/resume.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "nn/models/zoo.h"
#include "support/support.h"
#include "train/checkpoint.h"
#include "train/state_shards.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

// lenet (21,840 parameters) with an optimizer that has taken `steps` steps on
// pseudo-random gradients drawn from `seed`.
struct Trained {
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<Optimizer> opt;
  Trained(const std::string& optimizer, uint64_t seed, int steps = 0)
      : model(nn::make_model("lenet", seed)), opt(make_optimizer(optimizer, 0.0f, 0.9f)) {
    Rng rng(seed + 100);
    for (int s = 0; s < steps; ++s) step(rng);
  }
  void step(Rng& rng) {
    const Arena& a = model->params();
    for (int64_t i = 0; i < a.size(); ++i) a.grads().f32()[i] = rng.normal();
    opt->step(a.params().f32(), a.grads().f32(), a.size(), 0.01f);
  }
  std::vector<float> weights() const {
    const float* p = model->params().params().f32();
    return {p, p + model->num_params()};
  }
};

const ArenaRange kWhole{0, -1};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

class Resume : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info->name();
    std::replace(name.begin(), name.end(), '/', '_');  // parameterized: "Test/0"
    dir_ = fs::temp_directory_path() / ("cohort_resume_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    cfg_.model = "lenet";
    cfg_.epochs = 3;
    cfg_.save = path("run.safetensors");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Saves `run` as cfg_.save after epoch 1 and 3 updates.
  void save(Trained& run) {
    save_run_checkpoint(cfg_, *run.model, *run.opt, kWhole, nullptr, nullptr, {1, 3}, false);
  }

  // Rewrites cfg_.save through `edit` into a new file; returns its path.
  std::string rewrite(const std::string& name, const std::function<void(SafetensorsFile&)>& edit) {
    SafetensorsFile f = load_safetensors(cfg_.save);
    edit(f);
    save_safetensors(path(name), f.tensors, f.metadata);
    return path(name);
  }

  fs::path dir_;
  TrainConfig cfg_;
};

TEST_F(Resume, SaveHoldsOptimizerStateAndPosition) {
  Trained run("adam", 1, 3);
  save(run);
  SafetensorsFile f = load_safetensors(cfg_.save);
  EXPECT_EQ(f.metadata.at("model"), "lenet");
  EXPECT_EQ(f.metadata.at("epoch"), "1");
  EXPECT_EQ(f.metadata.at("updates"), "3");
  EXPECT_EQ(f.metadata.at("optimizer"), "adam");
  EXPECT_EQ(f.metadata.at("optimizer.steps"), "3");
  const std::vector<Tensor*> state = run.opt->state();
  ASSERT_EQ(state.size(), 2u);
  ASSERT_NE(f.find("optimizer.exp_avg"), nullptr);
  ASSERT_NE(f.find("optimizer.exp_avg_sq"), nullptr);
  EXPECT_EQ(f.find("optimizer.exp_avg")->shape(), Shape{run.model->num_params()});
  EXPECT_TRUE(same_bits(*f.find("optimizer.exp_avg"), *state[0]));
  EXPECT_TRUE(same_bits(*f.find("optimizer.exp_avg_sq"), *state[1]));
  EXPECT_NE(state[1]->f32()[0], 0.0f);  // a real state, not zeros
}

class ResumeOptimizer : public Resume, public ::testing::WithParamInterface<const char*> {};

TEST_P(ResumeOptimizer, RestoresWeightsStateAndStepsThenStepsAlike) {
  Trained saved(GetParam(), 1, 3), resumed(GetParam(), 2);
  save(saved);
  cfg_.optimizer = GetParam();
  cfg_.resume = cfg_.save;
  const RunPosition at = restore_checkpoint(cfg_, *resumed.model, *resumed.opt, kWhole, false);
  EXPECT_EQ(at.epoch, 1);
  EXPECT_EQ(at.updates, 3);
  EXPECT_EQ(resumed.opt->steps(), 3);
  EXPECT_EQ(resumed.weights(), saved.weights());
  const std::vector<Tensor*> a = saved.opt->state(), b = resumed.opt->state();
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(*a[i], *b[i])) << i;
  // The next step (SGD: the buffer is used, not reset; Adam: bias correction
  // at step 4) is the same bits in both.
  Rng ga(7), gb(7);
  saved.step(ga);
  resumed.step(gb);
  EXPECT_EQ(resumed.weights(), saved.weights());
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ResumeOptimizer, ::testing::Values("adam", "sgd", "adamw"));

TEST_F(Resume, LoadTakesTheWeightsOnly) {
  Trained saved("adam", 1, 3), loaded("sgd", 2);
  save(saved);
  cfg_.optimizer = "sgd";
  cfg_.load = cfg_.save;
  const RunPosition at = restore_checkpoint(cfg_, *loaded.model, *loaded.opt, kWhole, false);
  EXPECT_EQ(at.epoch, 0);
  EXPECT_EQ(at.updates, 0);
  EXPECT_EQ(loaded.weights(), saved.weights());
  EXPECT_EQ(loaded.opt->steps(), 0);
  EXPECT_TRUE(loaded.opt->state().empty());
}

// Each bad file: --resume throws a one-line InputError naming the file and
// `needle`, and the model and optimizer are as they were.
struct BadCase {
  const char* what;
  const char* optimizer;  // of the resuming run
  int epochs;
  std::function<void(SafetensorsFile&)> edit;
  const char* needle;
};

void erase_tensor(SafetensorsFile& f, const std::string& name) {
  std::erase_if(f.tensors, [&](const NamedTensor& t) { return t.name == name; });
}

std::vector<BadCase> bad_cases() {
  auto none = [](SafetensorsFile&) {};
  return {
      {"other optimizer", "sgd", 3, none, "--optimizer adam"},
      {"state of the wrong size", "adam", 3,
       [](SafetensorsFile& f) {
         for (auto& t : f.tensors)
           if (t.name == "optimizer.exp_avg") t.tensor = t.tensor.slice(0, 5).reshape({5});
       },
       "'optimizer.exp_avg' has shape [5]"},
      {"missing state", "adam", 3,
       [](SafetensorsFile& f) { erase_tensor(f, "optimizer.exp_avg_sq"); },
       "'optimizer.exp_avg_sq' is missing"},
      {"missing weight", "adam", 3, [](SafetensorsFile& f) { erase_tensor(f, "fc2.bias"); },
       "'fc2.bias' is missing"},
      {"no position", "adam", 3, [](SafetensorsFile& f) { f.metadata.erase("updates"); },
       "'updates'"},
      {"bad step count", "adam", 3,
       [](SafetensorsFile& f) { f.metadata["optimizer.steps"] = "-2"; }, "'optimizer.steps'"},
      {"other model", "adam", 3, [](SafetensorsFile& f) { f.metadata["model"] = "resnet18"; },
       "resnet18"},
      {"run already finished", "adam", 1, none, "--epochs 1"},
  };
}

TEST_F(Resume, BadFilesAreOneLineInputErrorsAndChangeNothing) {
  Trained saved("adam", 1, 3);
  save(saved);
  for (const BadCase& c : bad_cases()) {
    SCOPED_TRACE(c.what);
    Trained target(c.optimizer, 2);
    const std::vector<float> before = target.weights();
    cfg_.optimizer = c.optimizer;
    cfg_.epochs = c.epochs;
    cfg_.resume = rewrite(std::string(c.what) + ".safetensors", c.edit);
    try {
      restore_checkpoint(cfg_, *target.model, *target.opt, kWhole, false);
      ADD_FAILURE() << "no InputError";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(cfg_.resume), std::string::npos) << msg;
      EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
    EXPECT_EQ(target.weights(), before);
    EXPECT_EQ(target.opt->steps(), 0);
    EXPECT_TRUE(target.opt->state().empty());
  }
}

// A stage or parameter server restores its own range of the saved state.
TEST_F(Resume, RestoresARangeOfTheState) {
  Trained saved("adam", 1, 3), stage("adam", 2);
  save(saved);
  cfg_.resume = cfg_.save;
  const int64_t begin = 1000, end = 5000;
  restore_checkpoint(cfg_, *stage.model, *stage.opt, {begin, end}, false);
  EXPECT_EQ(stage.weights(), saved.weights());  // the whole model, on every rank
  EXPECT_EQ(stage.opt->steps(), 3);
  const std::vector<Tensor*> a = saved.opt->state(), b = stage.opt->state();
  ASSERT_EQ(b.size(), 2u);
  for (size_t i = 0; i < b.size(); ++i) {
    ASSERT_EQ(b[i]->shape(), Shape{end - begin});
    EXPECT_TRUE(same_bits(*b[i], a[i]->slice(begin, end))) << i;
  }
  // A parameter-server worker updates nothing and keeps no state.
  Trained worker("adam", 3);
  restore_checkpoint(cfg_, *worker.model, *worker.opt, {0, 0}, false);
  EXPECT_TRUE(worker.opt->state().empty());
  EXPECT_EQ(worker.weights(), saved.weights());
}

// The sharded layout (train/state_shards.h), written here by hand as 3
// ranks would: a range that crosses every shard boundary reads its slices,
// a single process all of them; a shard of another save (its generation
// differs, its size does not) is refused by name before anything changes.
TEST_F(Resume, RestoresARangeOfShardedState) {
  Trained saved("adam", 1, 3);
  save(saved);
  const int64_t n = saved.model->num_params(), cuts[] = {0, 7000, 15000, n};
  ShardListing listing{1, n, {}};
  for (int r = 0; r < 3; ++r) {
    const std::string name = shard_name(cfg_.save, 1, r, 3);
    std::vector<Tensor> parts;
    for (Tensor* t : saved.opt->state()) parts.push_back(t->slice(cuts[r], cuts[r + 1]));
    const uint64_t bytes = write_shard(path(name), saved.opt->state_names(),
                                       {&parts[0], &parts[1]}, cuts[r], cuts[r + 1], 1,
                                       {{"optimizer", "adam"}, {"optimizer.steps", "3"}});
    listing.files.push_back({name, cuts[r], cuts[r + 1], bytes});
  }
  cfg_.resume = rewrite("run.safetensors", [&](SafetensorsFile& f) {
    erase_tensor(f, "optimizer.exp_avg");
    erase_tensor(f, "optimizer.exp_avg_sq");
    f.metadata[kShardsKey] = listing_json(listing);
  });
  const std::vector<Tensor*> a = saved.opt->state();
  for (const ArenaRange range : {ArenaRange{5000, 16000}, kWhole}) {
    Trained rank("adam", 2);
    restore_checkpoint(cfg_, *rank.model, *rank.opt, range, false);
    const int64_t begin = range.first, end = range.second < 0 ? n : range.second;
    EXPECT_EQ(rank.weights(), saved.weights());
    EXPECT_EQ(rank.opt->steps(), 3);
    const std::vector<Tensor*> b = rank.opt->state();
    ASSERT_EQ(b.size(), 2u);
    for (size_t i = 0; i < b.size(); ++i)
      EXPECT_TRUE(same_bits(*b[i], a[i]->slice(begin, end))) << i << " from " << begin;
  }
  const std::string other = path(listing.files[1].file);
  SafetensorsFile shard = load_safetensors(other);
  shard.metadata["generation"] = "2";
  save_safetensors(other, shard.tensors, shard.metadata);
  Trained target("adam", 2);
  const std::string msg = testing_support::error_of(
      [&] { restore_checkpoint(cfg_, *target.model, *target.opt, {0, 100}, false); });
  EXPECT_NE(msg.find(other), std::string::npos) << msg;
  EXPECT_NE(msg.find("generation"), std::string::npos) << msg;
  EXPECT_TRUE(target.opt->state().empty());
  EXPECT_NE(target.weights(), saved.weights());
}

// A file saved without optimizer state (ranks whose step counts differed)
// resumes the weights and position; the optimizer restarts, and says so.
TEST_F(Resume, FileWithoutOptimizerStateResumesWithANotice) {
  Trained saved("adam", 1, 3), resumed("adam", 2);
  save(saved);
  cfg_.resume = rewrite("weights_only.safetensors", [](SafetensorsFile& f) {
    f.metadata.erase("optimizer.steps");
    erase_tensor(f, "optimizer.exp_avg");
    erase_tensor(f, "optimizer.exp_avg_sq");
  });
  ::testing::internal::CaptureStderr();
  const RunPosition at = restore_checkpoint(cfg_, *resumed.model, *resumed.opt, kWhole, true);
  const std::string note = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(note.find("holds no optimizer state"), std::string::npos) << note;
  EXPECT_EQ(std::count(note.begin(), note.end(), '\n'), 1) << note;
  EXPECT_EQ(at.updates, 3);
  EXPECT_EQ(resumed.weights(), saved.weights());
  EXPECT_EQ(resumed.opt->steps(), 0);
  EXPECT_TRUE(resumed.opt->state().empty());
}

// PyTorch reads a run checkpoint, optimizer state included, by the
// safetensors spec (json + struct + torch.frombuffer, as load_file does).
TEST_F(Resume, PyTorchReadsTheOptimizerState) {
  Trained run("adam", 1, 3);
  save(run);
  const Tensor* sq = run.opt->state()[1];
  char first[64];
  std::snprintf(first, sizeof first, "%.9g", double(sq->f32()[0]));
  testing_support::expect_pytorch_script(dir_.string(), cfg_.save, R"(
assert meta['optimizer'] == 'adam' and meta['optimizer.steps'] == '3', meta
assert t['optimizer.exp_avg_sq'].shape == (int(sys.argv[2]),), t['optimizer.exp_avg_sq'].shape
want = torch.tensor(float(sys.argv[3]), dtype=torch.float32)
assert torch.equal(t['optimizer.exp_avg_sq'][0], want), (t['optimizer.exp_avg_sq'][0], want)
assert (t['optimizer.exp_avg_sq'] >= 0).all()
)", std::to_string(sq->numel()) + " " + first);
}

}  // namespace
}  // namespace cohort
