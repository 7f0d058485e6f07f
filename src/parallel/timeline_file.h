// `--timeline FILE` (cohort train, bench step): records every rank's
// timeline (core/timeline.h) while it lives, then merges the ranks' events
// into one Chrome trace-event JSON file that Perfetto (ui.perfetto.dev) and
// chrome://tracing load: {"traceEvents": [...]}, one process per rank
// (named "rank N"; pid N + 1, since Perfetto keeps pid 0 for the kernel),
// one tid per lane (a thread, or a row of its own such as one gradient
// bucket), ts and dur in microseconds from rank 0's start.
//
// Clocks: ranks on one machine share steady_clock (CLOCK_MONOTONIC). For
// ranks on other hosts, rank 0 pings each rank at the start (8 round trips;
// the shortest gives offset = t_rank - (t_sent + t_back) / 2, Cristian's
// method) and a rank's events are shifted by its offset where it exceeds the
// round trip — on one machine it never does, so nothing is shifted there.
// The file's otherData lists each rank's offset and round trip.
#pragma once
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace cohort {

class TimelineFile {
 public:
  // Collective (every rank, alike): aligns the clocks and starts recording.
  // The path was checked writable before any work (check_writable).
  TimelineFile(std::string path, comm::Communicator* comm);
  ~TimelineFile();  // stops recording; writes nothing
  TimelineFile(const TimelineFile&) = delete;
  TimelineFile& operator=(const TimelineFile&) = delete;

  // Collective: stops recording; every rank sends its events to rank 0,
  // which writes the file whole or not at all (core/atomic_file.h).
  void write();

 private:
  void align_clocks();

  std::string path_;
  comm::Communicator* comm_;
  int64_t origin_ns_ = 0;  // rank 0's start, on this rank's clock
  // Rank 0: every rank's measured offset and shortest round trip (ns).
  std::vector<int64_t> offsets_, rtts_;
};

}  // namespace cohort
