// `cohort generate` from weights `cohort train --save` wrote: the prompt
// comes back followed by exactly --tokens sampled bytes, greedy sampling is
// deterministic, and bad input is one line and exit 2.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/support.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using testing_support::run;

TEST(GenerateCli, SamplesAfterThePromptFromSavedWeights) {
  const fs::path d = fs::temp_directory_path() / "cohort_generate_cli";
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string w = (d / "w.safetensors").string(), bin = COHORT_BIN;
  std::string out;
  ASSERT_EQ(run(bin + " train --model gpt2-tiny --seq 32 --data text --limit 64 --batch 16"
                      " --epochs 1 --threads 1 --log jsonl --save " + w,
                &out),
            0)
      << out;
  const std::string gen = bin + " generate --model gpt2-tiny --seq 32 --load " + w +
                          " --prompt 'The cat' --tokens 40 --threads 1";
  std::string a, b, c;
  ASSERT_EQ(run(gen + " --top-k 1", &a), 0) << a;
  ASSERT_EQ(run(gen + " --top-k 1", &b), 0) << b;
  EXPECT_EQ(a, b) << "greedy sampling is deterministic";
  ASSERT_EQ(a.rfind("The cat", 0), 0u) << a;
  EXPECT_EQ(a.size(), std::string("The cat").size() + 40 + 1) << a;  // + the newline
  ASSERT_EQ(run(gen + " --top-k 20 --seed 5", &c), 0) << c;
  EXPECT_EQ(c.size(), a.size());

  std::string e;
  EXPECT_EQ(run(bin + " generate --model mnist-small --load " + w, &e), 2) << e;
  EXPECT_NE(e.find("--model mnist-small"), std::string::npos) << e;
  e.clear();
  EXPECT_EQ(run(gen + " --temperature 0", &e), 2) << e;
  EXPECT_NE(e.find("--temperature"), std::string::npos) << e;
  e.clear();
  EXPECT_EQ(run(bin + " generate --model gpt2-tiny --load " + (d / "none").string(), &e), 2) << e;
  fs::remove_all(d);
}

}  // namespace
}  // namespace cohort
