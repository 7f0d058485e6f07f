// The helpers grid, strategies and tune share to read a subprocess back
// (bench/run_log.h) and to parse comma-list flags (bench/flag_lists.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/flag_lists.h"
#include "bench/run_log.h"
#include "core/error.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path write_log(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("cohort_run_log_test_" + name + ".log");
  std::ofstream(p) << text;
  return p;
}

TEST(BenchRunLog, LastSummaryIsTheLastSummaryLine) {
  const std::string out =
      "{\"event\":\"summary\",\"images_per_second\":1}\n"
      "not json\n"
      "{\"event\":\"epoch\",\"epoch\":1}\n"
      "{\"event\":\"summary\",\"images_per_second\":2}\n"
      "{\"event\":\"epoch\",\"epoch\":2}\n";
  EXPECT_EQ(cohort::last_summary(out).value("images_per_second", 0), 2);
  EXPECT_TRUE(cohort::last_summary("no summary\n").empty());
}

TEST(BenchRunLog, SummaryFiguresReadEpochsAndStepSplit) {
  const json s = json::parse(
      R"({"epoch_seconds":[2.0,1.0],"epoch_images_per_second":[50,100],)"
      R"("step_seconds":{"total":0.5,"compute":0.25,"communication":0.125}})");
  const cohort::SummaryFigures f = cohort::summary_figures(s);
  EXPECT_EQ(f.epoch_seconds, json::parse("[2.0,1.0]"));
  EXPECT_EQ(f.epoch_images_per_second, json::parse("[50,100]"));
  ASSERT_TRUE(f.step.has_value());
  EXPECT_DOUBLE_EQ(f.step->total, 0.5);
  EXPECT_DOUBLE_EQ(f.step->compute, 0.25);
  EXPECT_DOUBLE_EQ(f.step->communication, 0.125);
  EXPECT_DOUBLE_EQ(f.step->data, 0.0);  // absent: 0

  const cohort::SummaryFigures none = cohort::summary_figures(json::object());
  EXPECT_EQ(none.epoch_seconds, json::array());
  EXPECT_FALSE(none.step.has_value());
}

TEST(BenchRunLog, FailurePrefersErrorThenDeadRankThenLastText) {
  const fs::path log = write_log("failure",
                                 "$ cohort train --workers 2\n"
                                 "loading data\n"
                                 "ValueError: bad shape\n"
                                 "mpirun noticed that process rank 1 exited on signal 9 (Killed).\n"
                                 "--------------------------------------\n"
                                 "{\"event\":\"epoch\"}\n"
                                 "\n");
  const cohort::LogTail tail = cohort::read_log_tail(log);
  EXPECT_EQ(tail.last, "{\"event\":\"epoch\"}");
  EXPECT_EQ(tail.text, "mpirun noticed that process rank 1 exited on signal 9 (Killed).");
  EXPECT_EQ(tail.error, "ValueError: bad shape");
  EXPECT_EQ(tail.failure(), "ValueError: bad shape");

  cohort::LogTail no_error = tail;
  no_error.error.clear();
  EXPECT_EQ(no_error.failure(), tail.died);
  no_error.died.clear();
  EXPECT_EQ(no_error.failure(), tail.text);
  fs::remove(log);
}

TEST(BenchRunLog, ErrorLinesAreCohortPeerOrPython) {
  const fs::path log = write_log("errors",
                                 "cohort: --model: unknown model 'x'\n"
                                 "note: this is not an error\n"
                                 "Traceback (most recent call last):\n");
  EXPECT_EQ(cohort::read_log_tail(log).error, "cohort: --model: unknown model 'x'");
  EXPECT_EQ(cohort::read_log_tail(log).last, "Traceback (most recent call last):");
  fs::remove(log);
  EXPECT_EQ(cohort::read_log_tail(log).failure(), "");  // no log: nothing to say
}

TEST(BenchFlagLists, IntListsAreCheckedAndNameTheFlag) {
  EXPECT_EQ(cohort::parse_int_list("1,,4,2", "--workers"), (std::vector<int>{1, 4, 2}));
  EXPECT_EQ(cohort::parse_int_list("0", "--threads-per-rank", 0), (std::vector<int>{0}));
  for (const char* bad : {"0", "1,x", "2.5", ",", ""}) {
    try {
      cohort::parse_int_list(bad, "--batch");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const cohort::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--batch"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(cohort::parse_str_list("a,b,,c"), (std::vector<std::string>{"a", "b", "c"}));
}

}  // namespace
