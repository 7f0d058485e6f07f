// `cohort bench grid`: runs every point of a cartesian grid (models x workers x
// batch x repeat x threads per rank) as `cohort train` subprocesses, and the
// same points with the PyTorch peer, then writes results/NAME/.
#pragma once
#include <string>
#include <vector>

// last_summary, which the train and parallel tests reach through this header.
#include "bench/run_log.h"

namespace cohort {

// Comma lists as given on the command line; empty: not given (the grid file
// or the default applies).
struct GridFlags {
  std::string workers, batch, repeat, model, threads_per_rank;
  std::string epochs, limit, data, peer, name, grid, out;
};

struct GridSpec {
  std::vector<std::string> models = {"mnist-small"};
  std::vector<int> workers = {1, 2};
  std::vector<int> batch = {128};
  std::vector<int> repeat = {1};
  std::vector<int> threads_per_rank = {1};
  int epochs = 2;
  int limit = 6000;
  std::string data = "fashion-mnist";
  std::string peer;  // "" or "pytorch"
  std::string name;
  std::string out = "results";
};

// Defaults, then bench/grids/GRID.json (or a path), then the flags.
GridSpec resolve_grid(const GridFlags& flags);
// Runs the grid; returns the number of points that failed.
int run_grid(const GridSpec& spec);

}  // namespace cohort
