// `cohort bench grid --grid smoke` end to end: the result files exist, every
// grid point is present with positive rates and a plausible efficiency, and
// `cohort bench report` redraws them. Bad grid input is one line, exit 2.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>

#include "bench/report.h"
#include "support/support.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int code;
  std::string out;
};

Result run(const std::string& args) {
  Result r;
  r.code = cohort::testing_support::run(std::string(COHORT_BIN) + " " + args, &r.out);
  return r;
}

bool have_matplotlib() {
  return std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") == 0;
}

std::vector<nlohmann::json> read_jsonl(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(BenchGrid, SmokeGridWritesEveryPoint) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  const fs::path out = fs::temp_directory_path() / "cohort_grid_test";
  fs::remove_all(out);
  Result r = run("bench grid --grid smoke --name smoke-test --out " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  const fs::path dir = out / "smoke-test";
  for (const char* f : {"results.jsonl", "results.csv", "report.md"})
    EXPECT_TRUE(fs::exists(dir / f)) << f << "\n" << r.out;

  // The smoke grid: mnist-small, workers 1,2, batch 128, repeat 1.
  auto points = read_jsonl(dir / "results.jsonl");
  ASSERT_EQ(points.size(), 2u) << r.out;
  std::set<int> workers;
  for (auto& p : points) {
    workers.insert(p.at("workers").get<int>());
    EXPECT_EQ(p.at("model"), "mnist-small");
    EXPECT_GT(p.at("cohort_images_per_second").get<double>(), 0) << p.dump();
    EXPECT_GT(p.at("cohort_epoch1_ips").get<double>(), 0) << p.dump();
    EXPECT_GT(p.at("cohort_epoch2_ips").get<double>(), 0) << p.dump();
    EXPECT_GT(p.at("cohort_epoch1_seconds").get<double>(), 0) << p.dump();
    const double eff = p.at("cohort_efficiency").get<double>();
    EXPECT_GT(eff, 0) << p.dump();
    EXPECT_LE(eff, 1.5) << p.dump();
    EXPECT_GE(p.at("cohort_test_accuracy").get<double>(), 0);
    EXPECT_EQ(p.at("cohort_world_size").get<int>(), p.at("workers").get<int>());
    // The point's wall time holds its two epochs (and start-up and the test pass).
    EXPECT_GT(p.at("cohort_wall_seconds").get<double>(),
              p.at("cohort_epoch1_seconds").get<double>() +
                  p.at("cohort_epoch2_seconds").get<double>())
        << p.dump();
  }
  EXPECT_EQ(workers, (std::set<int>{1, 2}));
  EXPECT_DOUBLE_EQ(points[0].at("cohort_efficiency").get<double>(), 1.0);

  std::ifstream csv(dir / "results.csv");
  int lines = 0;
  for (std::string l; std::getline(csv, l);) ++lines;
  EXPECT_EQ(lines, 3);  // header + 2 points

  bool png = false;
  for (auto& e : fs::directory_iterator(dir)) png |= e.path().extension() == ".png";
  EXPECT_TRUE(have_matplotlib()) << "python3-matplotlib missing (scripts/setup.sh installs it)";
  EXPECT_TRUE(png) << r.out;

  // Redraw from results.jsonl alone.
  fs::remove(dir / "report.md");
  fs::remove(dir / "results.csv");
  Result rr = run("bench report " + dir.string());
  ASSERT_EQ(rr.code, 0) << rr.out;
  EXPECT_TRUE(fs::exists(dir / "report.md"));
  EXPECT_TRUE(fs::exists(dir / "results.csv"));
  std::ifstream md(dir / "report.md");
  std::string report((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(report.find("Wall time of the points: cohort"), std::string::npos) << report;
  fs::remove_all(out);
}

TEST(BenchGrid, BadInputIsOneLine) {
  Result r = run("bench grid --grid no-such-grid");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--grid"), std::string::npos) << r.out;
  r = run("bench grid --workers 1,x --out /tmp/cohort_grid_bad");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--workers"), std::string::npos) << r.out;
  r = run("bench report /nonexistent/grid/dir");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/grid/dir"), std::string::npos) << r.out;
}

}  // namespace

// Speed-up and efficiency against the 1-worker point of the same threads
// *setting*: with 0 (cores / ranks) the 1-worker point runs 2 threads and the
// 2-worker point 1 thread each, and they still form one series.
TEST(BenchGrid, EfficiencyFollowsTheThreadsSetting) {
  using nlohmann::ordered_json;
  auto point = [](int workers, int threads, int setting, double ips) {
    return ordered_json{{"model", "mnist-small"}, {"batch", 128},           {"repeat", 1},
                        {"workers", workers},     {"threads_per_rank", threads},
                        {"threads_setting", setting}, {"cohort_images_per_second", ips}};
  };
  std::vector<ordered_json> pts = {point(1, 2, 0, 1000), point(2, 1, 0, 1500),
                                   point(1, 1, 1, 600),  point(2, 1, 1, 1100)};
  cohort::derive_metrics(pts);
  EXPECT_DOUBLE_EQ(pts[1].at("cohort_speedup").get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(pts[1].at("cohort_efficiency").get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(pts[3].at("cohort_speedup").get<double>(), 1100.0 / 600);
  EXPECT_DOUBLE_EQ(pts[3].at("cohort_efficiency").get<double>(), 1100.0 / 1200);
  EXPECT_FALSE(pts[1].contains("ratio"));  // no peer measured
}
