// Heartbeats between ranks: what ends a job whose rank stopped making
// progress, by default and however long a step legitimately takes (Horovod's
// stall inspector and PyTorch's watchdog watch collectives; this watches the
// ranks). Every rank's background thread sends a beat to rank r+1 each
// second on a communicator of its own and watches the beats of rank r-1. A
// rank that stops beating (stopped by a signal, hung in the kernel, swapped
// out) is named by its successor within the limit, and the job is aborted.
// A rank that ends normally says so in its last beat, so finishing early is
// not a stall.
#pragma once
#include <mpi.h>

namespace cohort::comm {

// Seconds of silence after which a rank is declared stalled, by default:
// with one-second beats, named within 30 s.
constexpr double kDefaultHeartbeatLimit = 25;

// Starts the heartbeat over `world` (a no-op for one rank, or without
// MPI_THREAD_MULTIPLE). Called once, by mpi_world.
void start_heartbeat(MPI_Comm world);
// Sets the limit from --timeout (half of it, at least 2 s); <= 0: the default.
void set_heartbeat_limit(double seconds);
// Sends the last beat ("done") and stops the thread; before MPI_Finalize.
void stop_heartbeat();

}  // namespace cohort::comm
