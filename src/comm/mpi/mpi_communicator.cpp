// MPI backend: point-to-point over MPI with deadlines, library collectives,
// split, and Horovod's stall check. Blocking calls with a timeout are posted
// nonblocking and polled, so a stalled or lost peer becomes a CommError that
// names it instead of a hang.
#include "comm/mpi/mpi_communicator.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/kernels.h"
#include "comm/mpi/heartbeat.h"
#include "comm/mpi/mpi_check.h"

namespace cohort::comm {

namespace {

// MPI counts are int: longer messages go as several of at most 1 GiB.
constexpr size_t kMaxMessage = size_t(1) << 30;
// check_arrival's announcement: the label, truncated, so rank 0 can tell a
// rank that is at another point of the program from one that is late.
constexpr int kLabelBytes = 128;

std::mutex g_init_mu;
int g_worlds = 0;  // live world communicators; the last one finalizes
bool g_multiple = false;

bool finalized() {
  int f = 0;
  MPI_Finalized(&f);
  return f != 0;
}

std::string seconds_str(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Polls until every request completes (true) or `seconds` pass (false; the
// requests are left as they are). It spins briefly, since a message between
// ranks on one machine lands within microseconds, then yields and finally
// sleeps, so a rank waiting on a straggler leaves it the CPU (ranks may share
// cores). seconds <= 0 waits forever.
bool poll_all(MPI_Request* reqs, int n, double seconds) {
  constexpr int kSpins = 64;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    int done = 0;
    COHORT_MPI(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
    if (done) return true;
    if (i < kSpins) continue;
    const double waited = since(t0);
    if (seconds > 0 && waited >= seconds) return false;
    if (waited < 2e-3)
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(waited < 0.1 ? 50 : 1000));
  }
}

// Gives up on requests after a timeout: receives are cancelled, sends are
// left to finish or die with the job, so a timed-out send's buffer may still
// be read later. A CommError is meant to end the job, not to be retried.
void abandon(MPI_Request* reqs, int n) {
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&reqs[i]);
    MPI_Request_free(&reqs[i]);
  }
}

// Posts a possibly >1 GiB transfer as pieces; the same tag keeps them in order.
void post(bool send, const void* buf, size_t bytes, int peer, int tag, MPI_Comm comm,
          std::vector<MPI_Request>& out) {
  auto* p = static_cast<char*>(const_cast<void*>(buf));
  size_t off = 0;
  do {
    const int k = int(std::min(kMaxMessage, bytes - off));
    MPI_Request r;
    if (send)
      COHORT_MPI(MPI_Isend(p + off, k, MPI_BYTE, peer, tag, comm, &r));
    else
      COHORT_MPI(MPI_Irecv(p + off, k, MPI_BYTE, peer, tag, comm, &r));
    out.push_back(r);
    off += size_t(k);
  } while (off < bytes);
}

class MpiCommunicator;

class MpiRequest final : public Request {
 public:
  MpiRequest(const MpiCommunicator& comm, std::string what) : comm_(comm), what_(std::move(what)) {}
  ~MpiRequest() override {
    if (!finalized()) abandon(reqs_.data(), int(reqs_.size()));
  }
  void wait() override;
  bool test() override {
    int done = 0;
    COHORT_MPI(MPI_Testall(int(reqs_.size()), reqs_.data(), &done, MPI_STATUSES_IGNORE));
    return done != 0;
  }
  std::vector<MPI_Request> reqs_;

 private:
  const MpiCommunicator& comm_;
  std::string what_;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, bool world) : comm_(comm), world_(world) {
    COHORT_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    COHORT_MPI(MPI_Comm_rank(comm_, &rank_));
    COHORT_MPI(MPI_Comm_size(comm_, &size_));
    // Messages name world ranks, the numbers mpirun and the logs use.
    MPI_Group mine, all;
    COHORT_MPI(MPI_Comm_group(comm_, &mine));
    COHORT_MPI(MPI_Comm_group(MPI_COMM_WORLD, &all));
    std::vector<int> local(static_cast<size_t>(size_), 0);
    for (int i = 0; i < size_; ++i) local[size_t(i)] = i;
    world_rank_.resize(size_t(size_));
    COHORT_MPI(MPI_Group_translate_ranks(mine, size_, local.data(), all, world_rank_.data()));
    MPI_Group_free(&mine);
    MPI_Group_free(&all);
  }

  ~MpiCommunicator() override {
    if (!finalized()) MPI_Comm_free(&comm_);
    if (!world_) return;
    std::lock_guard<std::mutex> lock(g_init_mu);
    // Finalizing waits for every rank: never on the way out of an error.
    if (--g_worlds == 0 && std::uncaught_exceptions() == 0 && !finalized()) {
      stop_heartbeat();
      MPI_Finalize();
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // --timeout also sets how long a silent rank may go unnamed.
  void set_timeout(double seconds) override {
    Communicator::set_timeout(seconds);
    if (world_) set_heartbeat_limit(seconds);
  }

  void send(const void* buf, size_t bytes, int dst, int tag) override {
    if (blocking() && bytes <= kMaxMessage) {
      COHORT_MPI(MPI_Send(buf, int(bytes), MPI_BYTE, dst, tag, comm_));
      return;
    }
    std::vector<MPI_Request> reqs;
    post(true, buf, bytes, dst, tag, comm_, reqs);
    wait(reqs.data(), int(reqs.size()), [&] { return "send to " + who(dst) + tag_str(tag); });
  }

  void recv(void* buf, size_t bytes, int src, int tag) override {
    if (blocking() && bytes <= kMaxMessage) {
      COHORT_MPI(MPI_Recv(buf, int(bytes), MPI_BYTE, src, tag, comm_, MPI_STATUS_IGNORE));
      return;
    }
    std::vector<MPI_Request> reqs;
    post(false, buf, bytes, src, tag, comm_, reqs);
    wait(reqs.data(), int(reqs.size()), [&] { return "recv from " + who(src) + tag_str(tag); });
  }

  std::unique_ptr<Request> isend(const void* buf, size_t bytes, int dst, int tag) override {
    auto r = std::make_unique<MpiRequest>(*this, "send to " + who(dst) + tag_str(tag));
    post(true, buf, bytes, dst, tag, comm_, r->reqs_);
    return r;
  }

  std::unique_ptr<Request> irecv(void* buf, size_t bytes, int src, int tag) override {
    auto r = std::make_unique<MpiRequest>(*this, "recv from " + who(src) + tag_str(tag));
    post(false, buf, bytes, src, tag, comm_, r->reqs_);
    return r;
  }

  bool probe(int src, int tag) override {
    int flag = 0;
    COHORT_MPI(MPI_Iprobe(src, tag, comm_, &flag, MPI_STATUS_IGNORE));
    return flag != 0;
  }

  void sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src,
                int tag) override {
    if (blocking() && sbytes <= kMaxMessage && rbytes <= kMaxMessage) {
      COHORT_MPI(MPI_Sendrecv(sbuf, int(sbytes), MPI_BYTE, dst, tag, rbuf, int(rbytes), MPI_BYTE,
                              src, tag, comm_, MPI_STATUS_IGNORE));
      return;
    }
    std::vector<MPI_Request> reqs;
    post(false, rbuf, rbytes, src, tag, comm_, reqs);
    post(true, sbuf, sbytes, dst, tag, comm_, reqs);
    wait(reqs.data(), int(reqs.size()), [&] {
      return "sendrecv (recv from " + who(src) + ", send to " + who(dst) + ", tag " +
             std::to_string(tag) + ")";
    });
  }

  void broadcast(void* data, size_t bytes, int root) override {
    std::vector<MPI_Request> reqs;
    for (size_t off = 0; off < bytes; off += kMaxMessage) {
      const int k = int(std::min(kMaxMessage, bytes - off));
      char* p = static_cast<char*>(data) + off;
      if (blocking()) {
        COHORT_MPI(MPI_Bcast(p, k, MPI_BYTE, root, comm_));
      } else {
        reqs.emplace_back();
        COHORT_MPI(MPI_Ibcast(p, k, MPI_BYTE, root, comm_, &reqs.back()));
      }
    }
    if (!reqs.empty())
      wait(reqs.data(), int(reqs.size()), [&] { return "broadcast from " + who(root); });
  }

  void barrier() override {
    if (blocking()) {
      COHORT_MPI(MPI_Barrier(comm_));
      return;
    }
    MPI_Request r;
    COHORT_MPI(MPI_Ibarrier(comm_, &r));
    wait(&r, 1, [] { return std::string("barrier"); });
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub;
    COHORT_MPI(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub));
    if (sub == MPI_COMM_NULL) return nullptr;
    auto c = std::make_unique<MpiCommunicator>(sub, false);
    c->set_timeout(timeout_);
    c->set_polite(polite_);
    return c;
  }

  void check_arrival(const std::string& what) override;

  // Waits for `reqs` under the timeout; on expiry abandons them and throws
  // "rank R: <what> timed out after T s".
  template <typename Describe>
  void wait(MPI_Request* reqs, int n, Describe describe) const {
    if (blocking()) {
      COHORT_MPI(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE));
      return;
    }
    if (poll_all(reqs, n, timeout_)) return;
    abandon(reqs, n);
    throw CommError(who(rank_) + ": " + describe() + " timed out after " + seconds_str(timeout_) +
                    " s");
  }

  // MPI's own blocking calls spin; a timeout or set_polite waits in poll_all.
  bool blocking() const { return timeout_ <= 0 && !polite_; }

  std::string who(int r) const {
    return "rank " + std::to_string(r >= 0 && r < size_ ? world_rank_[size_t(r)] : r);
  }

 protected:
  // The ranks OpenMPI places on one node (one orted: a real machine, or a
  // namespace "host" of scripts/cluster.sh) share memory; the lowest of their
  // ranks names the host.
  int host_key() override {
    MPI_Comm node;
    COHORT_MPI(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
    int key = rank_;
    COHORT_MPI(MPI_Allreduce(MPI_IN_PLACE, &key, 1, MPI_INT, MPI_MIN, node));
    MPI_Comm_free(&node);
    return key;
  }

  void mpi_allreduce(float* data, int64_t n, ReduceOp op) override {
    constexpr int64_t kMaxCount = INT_MAX / 2;
    std::vector<MPI_Request> reqs;
    for (int64_t off = 0; off < n; off += kMaxCount) {
      const int k = int(std::min(kMaxCount, n - off));
      if (blocking()) {
        COHORT_MPI(MPI_Allreduce(MPI_IN_PLACE, data + off, k, MPI_FLOAT, MPI_SUM, comm_));
      } else {
        reqs.emplace_back();
        COHORT_MPI(MPI_Iallreduce(MPI_IN_PLACE, data + off, k, MPI_FLOAT, MPI_SUM, comm_,
                                  &reqs.back()));
      }
    }
    if (!reqs.empty()) wait(reqs.data(), int(reqs.size()), [] { return std::string("MPI allreduce"); });
    if (op == ReduceOp::kAverage) detail::scale(data, 1.0f / size_, n);
  }

 private:
  static std::string tag_str(int tag) { return " (tag " + std::to_string(tag) + ")"; }

  MPI_Comm comm_;
  bool world_;
  int rank_ = 0, size_ = 1;
  std::vector<int> world_rank_;
};

void MpiRequest::wait() { comm_.wait(reqs_.data(), int(reqs_.size()), [&] { return what_; }); }

// Every rank announces `what` to rank 0, which waits up to the timeout and
// answers each with a verdict. A rank other than 0 waits twice as long plus a
// second: rank 0 may itself arrive up to one timeout after it and then wait a
// full timeout for the rest, and the error that names the missing ranks should
// come from rank 0, not from the ranks waiting on its verdict.
void MpiCommunicator::check_arrival(const std::string& what) {
  if (timeout_ <= 0) {
    barrier();
    return;
  }
  if (size_ == 1) return;
  std::array<char, kLabelBytes> label{};
  std::memcpy(label.data(), what.data(), std::min(what.size(), size_t(kLabelBytes - 1)));
  const std::string quoted = "'" + what + "' within " + seconds_str(timeout_) + " s";
  if (rank_ != 0) {
    int verdict = -1;
    MPI_Request reqs[2];
    COHORT_MPI(MPI_Isend(label.data(), kLabelBytes, MPI_CHAR, 0, kArrivalTag, comm_, &reqs[0]));
    COHORT_MPI(MPI_Irecv(&verdict, 1, MPI_INT, 0, kArrivalReplyTag, comm_, &reqs[1]));
    if (!poll_all(reqs, 2, 2 * timeout_ + 1)) {
      abandon(reqs, 2);
      throw CommError(who(rank_) + ": " + who(0) + " did not confirm " + quoted);
    }
    if (verdict != 1)
      throw CommError(who(rank_) + ": " + who(0) + " stopped the job at '" + what +
                      "' (its error names the ranks at fault)");
    return;
  }
  std::vector<std::array<char, kLabelBytes>> got(static_cast<size_t>(size_));
  std::vector<MPI_Request> reqs(static_cast<size_t>(size_ - 1));
  for (int r = 1; r < size_; ++r)
    COHORT_MPI(MPI_Irecv(got[size_t(r)].data(), kLabelBytes, MPI_CHAR, r, kArrivalTag, comm_,
                         &reqs[size_t(r - 1)]));
  std::string missing, other;
  int n_missing = 0;
  if (!poll_all(reqs.data(), size_ - 1, timeout_)) {
    for (int r = 1; r < size_; ++r) {
      int done = 0;
      COHORT_MPI(MPI_Test(&reqs[size_t(r - 1)], &done, MPI_STATUS_IGNORE));
      if (done) continue;
      missing += (n_missing++ ? ", " : "") + std::to_string(world_rank_[size_t(r)]);
    }
    abandon(reqs.data(), size_ - 1);
  }
  for (int r = 1; r < size_ && other.empty(); ++r) {
    if (reqs[size_t(r - 1)] != MPI_REQUEST_NULL || got[size_t(r)] == label) continue;
    other = who(r) + " reached '" + std::string(got[size_t(r)].data()) + "' while " + who(0) +
            " reached '" + what + "'";
  }
  // The verdict goes to every rank that arrived, so they stop at once too.
  const int verdict = (n_missing == 0 && other.empty()) ? 1 : 0;
  for (int r = 1; r < size_; ++r)
    if (reqs[size_t(r - 1)] == MPI_REQUEST_NULL)
      COHORT_MPI(MPI_Send(&verdict, 1, MPI_INT, r, kArrivalReplyTag, comm_));
  if (n_missing)
    throw CommError((n_missing == 1 ? "rank " : "ranks ") + missing + " did not reach " + quoted);
  if (!other.empty()) throw CommError(other);
}

}  // namespace

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") ||
         std::getenv("PMI_SIZE");
}

std::unique_ptr<Communicator> mpi_world(int* argc, char*** argv) {
  std::lock_guard<std::mutex> lock(g_init_mu);
  int inited = 0;
  COHORT_MPI(MPI_Initialized(&inited));
  if (!inited) {
    if (finalized()) throw CommError("mpi_world: MPI was already finalized");
    int provided = 0;
    COHORT_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    COHORT_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    // The data-parallel strategy all-reduces on a background thread.
    if (provided < MPI_THREAD_SERIALIZED)
      throw CommError("MPI offers thread level " + std::to_string(provided) +
                      "; cohort needs MPI_THREAD_SERIALIZED or better");
    g_multiple = provided >= MPI_THREAD_MULTIPLE;
    start_heartbeat(MPI_COMM_WORLD);
  }
  // A private copy, so cohort's tags never meet another library's messages.
  MPI_Comm dup;
  COHORT_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  auto world = std::make_unique<MpiCommunicator>(dup, true);
  ++g_worlds;
  return world;
}

bool mpi_thread_multiple() { return g_multiple; }

void mpi_finalize() {
  std::lock_guard<std::mutex> lock(g_init_mu);
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited && !finalized()) {
    stop_heartbeat();
    MPI_Finalize();
  }
}

void mpi_abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited && !finalized()) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace cohort::comm
