#include "bench/sim_config.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "core/error.h"
#include "train/config.h"
#include "train/ds_config.h"

namespace cohort {

namespace {

std::set<std::string> lines_of(const std::string& s) {
  std::set<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.insert(line);
  return out;
}

// The training configuration simulate's flags stand for, before the file.
TrainConfig seeded(const SimulateConfig& c) {
  TrainConfig t;
  t.batch = c.plan.batch;
  t.accumulate = c.plan.accumulate;
  t.parallel = c.parallel;
  t.precision.precision = c.precision;
  t.precision.grad_dtype = c.grad_dtype;
  return t;
}

// The "--flag value" lines the file changed, parsed by a parser bound to c:
// only simulate's own flags; the rest (--lr, --optimizer, ...) set no step time.
void take_changed(const std::set<std::string>& before, const std::string& after,
                  SimulateConfig& c) {
  CLI::App app;
  add_simulate_options(app, c);
  std::vector<std::string> args;
  for (const std::string& line : lines_of(after)) {
    if (before.count(line) || line.rfind("--config ", 0) == 0) continue;
    const auto space = line.find(' ');
    const std::string flag = line.substr(0, space);
    if (space == std::string::npos || !app.get_option_no_throw(flag)) continue;
    args.push_back(flag + "=" + line.substr(space + 1));
  }
  std::reverse(args.begin(), args.end());  // CLI11 parses the vector from its back
  app.parse(args);
}

}  // namespace

std::vector<std::string> apply_sim_config(const CLI::App& simulate, SimulateConfig& c) {
  if (c.config.empty()) return {};
  std::set<std::string> given;
  for (const CLI::Option* o : simulate.get_options())
    if (o->count() > 0) given.insert(o->get_name());
  TrainConfig t = seeded(c);
  const std::set<std::string> before = lines_of(t.describe());
  COHORT_INPUT_CHECK(c.hosts >= 1 && c.ranks_per_host >= 1,
                     "--config: --hosts and --ranks-per-host must be at least 1");
  apply_ds_config(c.config, t, given, c.hosts * c.ranks_per_host);
  const std::string precision = c.precision;
  take_changed(before, t.describe(), c);
  COHORT_INPUT_CHECK(c.precision == precision || c.compute != "measured", "--config ", c.config,
                     ": ", c.precision, ".enabled: measured compute is fp32; give ", c.precision,
                     " times with --compute FILE, or --precision fp32");
  return t.config_notes;
}

}  // namespace cohort
