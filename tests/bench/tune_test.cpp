// `cohort bench tune` end to end on a tiny space: every candidate is measured
// and present, the best is the fastest of them, and bad input is one line
// naming the flag with exit code 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>

#include "support/support.h"

namespace {

namespace fs = std::filesystem;
using cohort::testing_support::last_json;
using cohort::testing_support::run;

TEST(Tune, TinySpaceFindsTheFastest) {
#if COHORT_WITH_MPI
  const std::string processes = "1,2";
#else
  GTEST_SKIP() << "bench tune is built with MPI only";
  const std::string processes = "1";
#endif
  std::string out;
  const int code = run(std::string(COHORT_BIN) + " bench tune --model mnist-small --processes " +
                           processes + " --threads 1 --batch 16,32 --steps 3 --cpus 2",
                       &out);
  ASSERT_EQ(code, 0) << out;
  const auto j = last_json(out);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j.at("event"), "tune");
  EXPECT_EQ(j.at("model"), "mnist-small");

  std::set<std::tuple<int, int, int>> want, got;
  for (int p = 1; p <= (processes == "1" ? 1 : 2); ++p)
    for (int b : {16, 32}) want.insert({p, 1, b});
  double fastest = 0;
  for (const auto& c : j.at("candidates")) {
    got.insert(
        {c.at("processes").get<int>(), c.at("threads").get<int>(), c.at("batch").get<int>()});
    ASSERT_FALSE(c.contains("error")) << c.dump() << "\n" << out;
    const double ips = c.at("images_per_second").get<double>();
    EXPECT_GT(ips, 0) << c.dump();
    EXPECT_EQ(c.at("global_batch").get<int>(),
              c.at("batch").get<int>() * c.at("processes").get<int>());
    fastest = std::max(fastest, ips);
  }
  EXPECT_EQ(got, want) << out;
  const auto& best = j.at("best");
  EXPECT_DOUBLE_EQ(best.at("images_per_second").get<double>(), fastest) << out;
  const auto& first = j.at("candidates").at(0);  // fastest first
  EXPECT_EQ(best.at("processes"), first.at("processes"));
  EXPECT_EQ(best.at("threads"), first.at("threads"));
  EXPECT_EQ(best.at("batch"), first.at("batch"));
  EXPECT_NE(out.find("vs fastest"), std::string::npos) << out;  // the human table
}

#if COHORT_WITH_MPI
// An mpirun that always fails: the 2-process candidates fail, the others run.
TEST(Tune, FailedCandidateIsReportedNotFatal) {
  const fs::path bin = fs::temp_directory_path() / "cohort_tune_test_bin";
  fs::create_directories(bin);
  std::ofstream(bin / "mpirun")
      << "#!/bin/sh\necho 'mpirun: refused by the tune test' >&2\nexit 3\n";
  fs::permissions(bin / "mpirun", fs::perms::owner_all);
  const std::string env = "PATH=" + bin.string() + ":$PATH ";
  const std::string tune =
      env + COHORT_BIN + " bench tune --threads 1 --batch 16 --steps 2 --cpus 2";

  std::string out;
  ASSERT_EQ(run(tune + " --processes 1,2", &out), 0) << out;
  auto j = last_json(out);
  ASSERT_EQ(j.at("candidates").size(), 2u) << out;
  EXPECT_EQ(j.at("best").at("processes"), 1) << out;
  const auto& failed = j.at("candidates").at(1);
  EXPECT_EQ(failed.at("processes"), 2) << out;
  EXPECT_NE(failed.value("error", "").find("refused by the tune test"), std::string::npos) << out;
  EXPECT_NE(out.find("failed"), std::string::npos) << out;
  fs::remove_all(j.value("logs", ""));  // kept by tune for the failed runs

  out.clear();
  EXPECT_EQ(run(tune + " --processes 2", &out), 1) << out;
  j = last_json(out);
  EXPECT_TRUE(j.at("best").is_null()) << out;
  fs::remove_all(j.value("logs", ""));
  fs::remove_all(bin);
}
#endif

TEST(Tune, BadInputNamesTheFlag) {
  for (auto [args, flag] :
       {std::pair{"--batch 16,0", "--batch"}, std::pair{"--processes ,", "--processes"},
        std::pair{"--threads 1,x", "--threads"}, std::pair{"--model no-such-model", "--model"},
        std::pair{"--steps 0", "--steps"}}) {
    std::string out;
    const int code = run(std::string(COHORT_BIN) + " bench tune " + args, &out);
    EXPECT_EQ(code, 2) << args << "\n" << out;
    EXPECT_NE(out.find(flag), std::string::npos) << args << "\n" << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << args << "\n" << out;
  }
}

}  // namespace
