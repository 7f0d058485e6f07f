// `cohort bench strategies` end to end on a few fast rows: every row is in
// results.jsonl and the closing JSON line at the same global batch, with a
// positive rate and a utilization in (0, 1]; bad input is one line naming
// the flag, exit code 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "support/support.h"

namespace {

namespace fs = std::filesystem;
using cohort::testing_support::last_json;
using cohort::testing_support::run;
using nlohmann::json;

const std::string kBin = COHORT_BIN;

void expect_row(const json& r) {
  EXPECT_EQ(r.at("status"), "ok") << r.dump();
  EXPECT_EQ(r.at("global_batch").get<int>(), 128) << r.dump();
  EXPECT_GT(r.at("images_per_second").get<double>(), 0) << r.dump();
  EXPECT_GT(r.at("epoch_seconds").at(0).get<double>(), 0) << r.dump();
  const double u = r.at("utilization").get<double>();
  EXPECT_GT(u, 0) << r.dump();
  EXPECT_LE(u, 1.0) << r.dump();
  EXPECT_GT(r.at("vs_single").get<double>(), 0) << r.dump();
  // Every rank's peak RSS, for the table's memory column.
  const json& mb = r.at("peak_memory_mb_per_rank");
  EXPECT_EQ(int(mb.size()), r.at("ranks").get<int>()) << r.dump();
  for (const auto& v : mb) EXPECT_GT(v.get<double>(), 0) << r.dump();
}

TEST(Strategies, FastRowsShareOneGlobalBatch) {
#if !COHORT_WITH_MPI
  GTEST_SKIP() << "the dp and mp rows need the MPI build";
#endif
  const fs::path dir = fs::temp_directory_path() / "cohort_strategies_test";
  fs::remove_all(dir);
  std::string out;
  const int code = run(kBin +
                           " bench strategies --model mnist-small --limit 512 --epochs 1 "
                           "--only single,dp,mp --peer none --out " +
                           dir.string(),
                       &out);
  ASSERT_EQ(code, 0) << out;

  const json ev = last_json(out);
  ASSERT_TRUE(ev.is_object()) << out;
  EXPECT_EQ(ev.at("event"), "strategies");
  EXPECT_EQ(ev.at("failed").get<int>(), 0);
  std::set<std::string> names;
  for (const auto& r : ev.at("rows")) {
    names.insert(r.at("name").get<std::string>());
    expect_row(r);
  }
  EXPECT_EQ(names, (std::set<std::string>{"single", "dp", "mp"}));
  EXPECT_DOUBLE_EQ(ev.at("rows").at(0).at("vs_single").get<double>(), 1.0);

  // The same rows on disk, and the table in report.md.
  std::ifstream jl(dir / "results.jsonl");
  int lines = 0;
  for (std::string line; std::getline(jl, line); ++lines) expect_row(json::parse(line));
  EXPECT_EQ(lines, 3);
  std::ifstream md(dir / "report.md");
  std::stringstream report;
  report << md.rdbuf();
  for (const char* want :
       {"| strategy |", "peak MB/rank", "cohort single process", "cohort dp", "cohort mp"})
    EXPECT_NE(report.str().find(want), std::string::npos) << want << "\n" << report.str();
  fs::remove_all(dir);
}

// Bad input stops before any row runs: exit 2, one line that names the flag.
void expect_refused(const std::string& args, const std::string& flag) {
  std::string out;
  EXPECT_EQ(run(kBin + " bench strategies " + args + " --out /tmp/cohort_strategies_bad", &out), 2)
      << out;
  EXPECT_NE(out.find(flag), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

TEST(Strategies, BadInputIsOneLine) {
  expect_refused("--model no-such-model --peer none", "--model");
  expect_refused("--model mnist-small --batch 127 --peer none", "--batch");
  expect_refused("--model mnist-small --only single,warp --peer none", "--only");
  expect_refused("--model mnist-small --peer tensorflow", "--peer");
}

}  // namespace
