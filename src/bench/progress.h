// One progress line per finished item of a benchmark run (grid points,
// strategies), with elapsed time and an ETA, on stderr.
#pragma once
#include <cstddef>
#include <string>

namespace cohort {

// "42s", "3m05s", "1h02m".
std::string fmt_seconds(double s);
// "<who> [####....] done/total  elapsed 1m02s  ETA 3m10s  what"; the ETA
// weighs the items: done_w of total_w is finished after `elapsed` seconds.
void progress(const char* who, size_t done, size_t total, double done_w, double total_w,
              double elapsed, const std::string& what);

}  // namespace cohort
