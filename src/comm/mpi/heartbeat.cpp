#include "comm/mpi/heartbeat.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "comm/mpi/mpi_communicator.h"

namespace cohort::comm {

namespace {

constexpr int kBeatTag = 7001;
constexpr int kAlive = 1, kDone = 2;
using Clock = std::chrono::steady_clock;

class Heartbeat {
 public:
  explicit Heartbeat(MPI_Comm world) {
    MPI_Comm_dup(world, &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    thread_ = std::thread([this] { run(); });
  }
  ~Heartbeat() { stop(); }
  // Half of --timeout (at least 2 s): a silent rank is named before any
  // collective's own deadline reports the wait instead.
  void set_limit(double s) { limit_ = s > 0 ? std::max(2.0, s / 2) : kDefaultHeartbeatLimit; }
  void stop() {
    if (!thread_.joinable()) return;
    stop_ = true;
    thread_.join();
  }

 private:
  int next() const { return (rank_ + 1) % size_; }
  int prev() const { return (rank_ + size_ - 1) % size_; }

  void send(int beat) {
    if (send_req_ != MPI_REQUEST_NULL) MPI_Request_free(&send_req_);  // eager: it lands
    out_ = beat;
    MPI_Isend(&out_, 1, MPI_INT, next(), kBeatTag, comm_, &send_req_);
  }
  // True while the predecessor beats (or has said it is done).
  bool watch(Clock::time_point& heard) {
    if (prev_done_) return true;
    int got = 0;
    MPI_Test(&recv_req_, &got, MPI_STATUS_IGNORE);
    while (got) {
      heard = Clock::now();
      if (in_ == kDone) {
        prev_done_ = true;
        return true;
      }
      MPI_Irecv(&in_, 1, MPI_INT, prev(), kBeatTag, comm_, &recv_req_);
      MPI_Test(&recv_req_, &got, MPI_STATUS_IGNORE);
    }
    return std::chrono::duration<double>(Clock::now() - heard).count() < limit_;
  }
  void run();
  [[noreturn]] void abort_job(double silent);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  int out_ = 0, in_ = 0;
  MPI_Request send_req_ = MPI_REQUEST_NULL, recv_req_ = MPI_REQUEST_NULL;
  bool prev_done_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<double> limit_{kDefaultHeartbeatLimit};
  std::thread thread_;
};

void Heartbeat::run() {
  MPI_Irecv(&in_, 1, MPI_INT, prev(), kBeatTag, comm_, &recv_req_);
  Clock::time_point heard = Clock::now(), beat = Clock::time_point{};
  while (!stop_) {
    if (Clock::now() - beat >= std::chrono::seconds(1)) {
      send(kAlive);
      beat = Clock::now();
    }
    if (!watch(heard))
      abort_job(std::chrono::duration<double>(Clock::now() - heard).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  send(kDone);
  if (!prev_done_) {
    MPI_Cancel(&recv_req_);
    MPI_Wait(&recv_req_, MPI_STATUS_IGNORE);
  }
  if (send_req_ != MPI_REQUEST_NULL) MPI_Wait(&send_req_, MPI_STATUS_IGNORE);
}

void Heartbeat::abort_job(double silent) {
  std::fprintf(stderr,
               "cohort rank %d: rank %d stopped making progress (no heartbeat for %.0f s); "
               "ending the job\n",
               rank_, prev(), silent);
  mpi_abort(3);
}

std::mutex g_mu;
std::unique_ptr<Heartbeat> g_heartbeat;

}  // namespace

void start_heartbeat(MPI_Comm world) {
  std::lock_guard<std::mutex> lock(g_mu);
  int size = 1;
  MPI_Comm_size(world, &size);
  if (g_heartbeat || size < 2 || !mpi_thread_multiple()) return;
  g_heartbeat = std::make_unique<Heartbeat>(world);
}

void set_heartbeat_limit(double seconds) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_heartbeat) g_heartbeat->set_limit(seconds);
}

void stop_heartbeat() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_heartbeat) g_heartbeat->stop();
}

}  // namespace cohort::comm
