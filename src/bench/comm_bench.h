// `cohort bench comm`: all-reduce bus bandwidth for cohort's ring, tree and
// hierarchical algorithms (and auto's pick) beside the peers measured in the same run: the MPI
// library's MPI_Allreduce and PyTorch's gloo all_reduce; and one-way
// point-to-point bandwidth from rank 0 (p2p_gbps: bytes/s, not bus bandwidth).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "comm/communicator.h"

namespace cohort {

struct CommBenchConfig {
  int64_t min_bytes = 4;           // smallest message (rounded up to whole floats)
  int64_t max_bytes = 256 << 20;   // largest message
  int factor = 4;                  // each size is the last times this
  double seconds = 0.3;            // timing budget per size and algorithm
  int repeats = 10;                // timed batches; the fastest counts
  std::string peer = "pytorch";    // "pytorch": gloo on rank 0 after cohort; "" none
  // > 0: cohort's algorithms are timed with this communicator timeout (its
  // polled, deadline-checked waits); MPI_Allreduce is always timed without,
  // since with one it would be MPI_Iallreduce, another algorithm.
  double timeout = 0;
  // --ranks-per-host: the host layout to pretend ("2", "3,1"; see
  // comm::parse_ranks_per_host); empty: the one the launcher reports.
  std::string ranks_per_host;
};

// Collective: every rank of `c` must call it with the same config. Rank 0
// prints a table to stderr and one JSON line to stdout, and returns that JSON
// (the others return it too, without the peer's figures printed).
nlohmann::ordered_json run_comm_bench(comm::Communicator& c, const CommBenchConfig& cfg);

}  // namespace cohort
