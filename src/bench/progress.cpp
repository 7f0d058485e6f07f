#include "bench/progress.h"

#include <cstdio>

namespace cohort {

std::string fmt_seconds(double s) {
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%dh%02dm", int(s / 3600), int(s / 60) % 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%dm%02ds", int(s / 60), int(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%ds", int(s));
  return buf;
}

void progress(const char* who, size_t done, size_t total, double done_w, double total_w,
              double elapsed, const std::string& what) {
  const int width = 30;
  const int filled = total_w > 0 ? int(width * done_w / total_w) : width;
  std::string bar(size_t(filled), '#');
  bar.resize(size_t(width), '.');
  std::string eta = done_w > 0 ? fmt_seconds(elapsed / done_w * (total_w - done_w)) : "?";
  std::fprintf(stderr, "%s [%s] %zu/%zu  elapsed %s  ETA %s  %s\n", who, bar.c_str(), done, total,
               fmt_seconds(elapsed).c_str(), eta.c_str(), what.c_str());
  std::fflush(stderr);
}

}  // namespace cohort
