// The grid file parser (resolve_grid) on hostile files, found while writing
// its fuzz target (tests/fuzz/grid_fuzz.cpp): each is one InputError naming
// the file and the key.
#include <fstream>
#include <string>

#include "bench/grid.h"
#include "data/data_test_util.h"

namespace cohort {
namespace {

// Writes `text` to a grid file and returns resolve_grid's error ("" if none).
std::string grid_error(const std::string& text) {
  testing::TempDir dir;
  std::ofstream(dir.file("g.json")) << text;
  GridFlags flags;
  flags.grid = dir.file("g.json");
  flags.name = "g";
  std::string err;
  try {
    resolve_grid(flags);
  } catch (const InputError& e) {
    err = e.what();
  }
  return err;
}

// 300,000 nested arrays used to recurse off the stack (SIGSEGV).
TEST(GridFile, DeepNestingIsRefusedNotACrash) {
  const int depth = 300000;
  std::string err =
      grid_error("{\"batch\":" + std::string(depth, '[') + "1" + std::string(depth, ']') + "}");
  EXPECT_NE(err.find("g.json: 'batch' must be"), std::string::npos) << err;
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
