// --freeze under the strategies that cut or shard the model: each ends with
// the single process's weights under the same --freeze (conv1 of
// mnist-small frozen), its frozen conv1 bit-identical to the start. The
// plans cover a stage wholly frozen (pp --split 1: no backward, no gradient
// sent to it), a stage partly frozen (hybrid --split 3), three stages (mp)
// parameter servers and ZeRO (1, 3) sharding only the trainable range.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "bench/grid.h"
#include "nn/models/zoo.h"
#include "support/support.h"
#include "train/checkpoint.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

using testing_support::checkpoint_rel_diff;
using testing_support::run;

// Weight decay moves every weight the optimizer steps, gradient or not.
const std::string kTrain = testing_support::equality_train_command() +
                           " --model mnist-small --freeze conv1 --weight-decay 0.01";

// What a pipeline's timeline shows of gradients between stages.
enum class Dx { kNotAPipeline, kNoneSent, kSent };

struct Plan {
  std::string flags, name;
  int batch;  // per replica or worker; the single process runs 32
  Dx dx = Dx::kNotAPipeline;
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

void PrintTo(const Plan& p, std::ostream* os) { *os << p.flags; }

class FreezeEquality : public ::testing::TestWithParam<Plan> {
 protected:
  // One single-process run serves every plan.
  static void SetUpTestSuite() {
    // A folder of this process's own: ctest -j2 runs the plans in parallel processes,
    // and a shared one was removed under a running plan.
    std::string tmpl = (fs::path(testing::TempDir()) / "cohort_freeze_parallel.XXXXXX").string();
    if (!mkdtemp(tmpl.data())) std::perror("mkdtemp");
    dir_ = new fs::path(tmpl);
    single_ = new std::string((*dir_ / "single.safetensors").string());
    std::string out;
    single_ok_ = run(kTrain + " --batch 32 --save " + *single_, &out) == 0;
    if (!single_ok_) std::fprintf(stderr, "%s\n", out.c_str());
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete single_;
  }
  static fs::path* dir_;
  static std::string* single_;
  static bool single_ok_;
};

fs::path* FreezeEquality::dir_ = nullptr;
std::string* FreezeEquality::single_ = nullptr;
bool FreezeEquality::single_ok_ = false;

TEST_P(FreezeEquality, MatchesTheSingleProcessAndKeepsFrozenWeights) {
  const Plan& p = GetParam();
  ASSERT_TRUE(single_ok_);
  const std::string mine = (*dir_ / (p.name + ".safetensors")).string();
  const std::string trace = (*dir_ / (p.name + ".json")).string();
  const std::string timeline = p.dx == Dx::kNotAPipeline ? "" : " --timeline " + trace;
  std::string out;
  ASSERT_EQ(run(kTrain + " --batch " + std::to_string(p.batch) + " " + p.flags + timeline +
                    " --save " + mine,
                &out),
            0)
      << out;
  if (p.dx != Dx::kNotAPipeline) {
    // A stage below the first trainable layer is sent no gradient at all.
    std::ifstream in(trace);
    const std::string t((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_GT(count(t, "\"send activation\""), 0u) << trace;
    EXPECT_EQ(count(t, "\"send gradient\"") > 0, p.dx == Dx::kSent) << p.flags;
  }
  EXPECT_EQ(last_summary(out)["global_batch"].get<int>(), 32) << out;
  EXPECT_LE(checkpoint_rel_diff(mine, *single_), 1e-5) << p.flags;
  // conv1 (weight and bias, the arena's first two tensors) as initialized.
  auto fresh = nn::make_model("mnist-small", 0);
  const SafetensorsFile f = load_safetensors(mine);
  for (size_t i = 0; i < 2; ++i) {
    const std::string& name = fresh->params().infos()[i].name;
    const Tensor* w = f.find(name);
    ASSERT_NE(w, nullptr) << name;
    const Tensor init = fresh->params().param(i);
    ASSERT_EQ(w->nbytes(), init.nbytes()) << name;
    EXPECT_EQ(std::memcmp(w->data(), init.data(), size_t(init.nbytes())), 0) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Plans, FreezeEquality,
    ::testing::Values(
        Plan{"--parallel pp --stages 2 --split 1 --micro-batches 4 --schedule 1f1b",
             "pp_stage0_frozen", 32, Dx::kNoneSent},
        Plan{"--parallel mp --stages 3 --split 1,3", "mp_three_stages", 32, Dx::kSent},
        Plan{"--parallel hybrid --dp 2 --stages 2 --split 3 --micro-batches 2",
             "hybrid_stage0_partly_frozen", 16, Dx::kSent},
        Plan{"--workers 4 --parallel ps --ps-mode sync --servers 2", "ps_sync", 16},
        Plan{"--workers 2 --parallel zero --zero-stage 1", "zero1", 16},
        Plan{"--workers 2 --parallel zero --zero-stage 3", "zero3", 16}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace cohort
