// The grid file parser (resolve_grid) on hostile files, found while writing
// its fuzz target (tests/fuzz/grid_fuzz.cpp): each is one InputError naming
// the file and the key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "bench/grid.h"
#include "core/error.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

// Writes `text` to a grid file and returns resolve_grid's error ("" if none).
std::string grid_error(const std::string& text) {
  const fs::path p = fs::temp_directory_path() /
                     ("cohort_grid_file_test_" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << text;
  GridFlags flags;
  flags.grid = p.string();
  flags.name = "g";
  std::string err;
  try {
    resolve_grid(flags);
  } catch (const InputError& e) {
    err = e.what();
  }
  fs::remove(p);
  return err;
}

// 300,000 nested arrays used to recurse off the stack (SIGSEGV).
TEST(GridFile, DeepNestingIsRefusedNotACrash) {
  const int depth = 300000;
  std::string err =
      grid_error("{\"batch\":" + std::string(depth, '[') + "1" + std::string(depth, ']') + "}");
  EXPECT_NE(err.find(".json: 'batch' must be"), std::string::npos) << err;
}

// A float, bool or object used to be read as "" and silently ignored.
TEST(GridFile, ValuesOfTheWrongKindAreNamed) {
  EXPECT_NE(grid_error("{\"workers\": 1.5}").find("'workers'"), std::string::npos);
  EXPECT_NE(grid_error("{\"epochs\": true}").find("'epochs'"), std::string::npos);
  EXPECT_NE(grid_error("{\"batch\": [64, {}]}").find("'batch'"), std::string::npos);
  EXPECT_EQ(grid_error("{\"batch\": [64, \"128\"], \"workers\": 1}"), "");
}

}  // namespace
}  // namespace cohort
