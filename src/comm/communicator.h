// Communicator (DESIGN principle 4): the one interface strategies speak to.
// A backend (MPI now, NCCL later) provides point-to-point transport and its
// own library collectives; the algorithms (ring, tree) are written once over
// the point-to-point calls, in comm/ring.cpp and comm/tree.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace cohort::comm {

enum class ReduceOp { kSum, kAverage };
// ring: reduce-scatter then allgather (bandwidth-optimal); tree: recursive
// halving-doubling (latency-optimal); mpi: the library's MPI_Allreduce;
// hierarchical: inside each host, then between hosts, then inside again
// (comm/hierarchical.cpp); auto: picks by message size and host layout.
enum class Algorithm { kRing, kTree, kMpi, kHierarchical, kAuto };

Algorithm parse_algorithm(const std::string& name);  // InputError naming --allreduce
const char* algorithm_name(Algorithm a);

// Which ranks share a host (shared memory among them, the network beyond).
struct HostLayout {
  std::vector<int> host_of;  // per rank; hosts numbered in order of their lowest rank
  int hosts = 1;
  int max_per_host = 1;
  bool uniform = true;  // every host holds the same number of ranks
};
// A layout of hosts holding these numbers of ranks, in rank order.
HostLayout layout_of(const std::vector<int>& ranks_per_host);
// --ranks-per-host: "R" (R per host, the last may hold fewer) or "A,B,..."
// (one count per host, summing to world). InputError naming the flag.
std::vector<int> parse_ranks_per_host(const std::string& spec, int world);

// What kAuto runs for a message of `bytes` on `world` ranks laid out over
// hosts as `layout` (the rule and its measurements: communicator.cpp).
Algorithm choose_algorithm(size_t bytes, int world, const HostLayout& layout = {});
// Whether that choice can depend on the layout (else it need not be found).
bool choice_needs_layout(size_t bytes, int world);

// Tags at or above kFirstInternalTag belong to cohort's collectives; user
// point-to-point tags must stay below it (MPI guarantees tags up to 32767).
constexpr int kFirstInternalTag = 30000;
constexpr int kRingTag = 30000;
constexpr int kTreeTag = 30001;
constexpr int kArrivalTag = 30002;
constexpr int kArrivalReplyTag = 30003;
constexpr int kHierTag = 30004;

class Communicator;
// The sub-communicators of the hierarchical all-reduce: this rank's host,
// and the ranks with its index on the other hosts (one per host).
struct Hierarchy {
  HostLayout layout;
  std::unique_ptr<Communicator> local;  // this host's ranks, in rank order
  std::unique_ptr<Communicator> cross;  // the ranks with local->rank() on every host
};

// A collective or receive that did not complete within the timeout, or a
// lost peer. The message names the ranks at fault.
class CommError : public Error {
 public:
  using Error::Error;
};

class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;  // honours the communicator's timeout
  virtual bool test() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Point-to-point, in bytes. Blocking calls honour the timeout.
  virtual void send(const void* buf, size_t bytes, int dst, int tag) = 0;
  virtual void recv(void* buf, size_t bytes, int src, int tag) = 0;
  virtual std::unique_ptr<Request> isend(const void* buf, size_t bytes, int dst, int tag) = 0;
  virtual std::unique_ptr<Request> irecv(void* buf, size_t bytes, int src, int tag) = 0;
  // Whether a message from src with tag is waiting to be received (never blocks).
  virtual bool probe(int src, int tag) = 0;
  // Simultaneous send and receive (the step of ring and tree algorithms).
  virtual void sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes,
                        int src, int tag) = 0;

  // Collectives take typed views (a Tensor, or a float*/BF16*/... pointer):
  // element counts, and bytes from the view's dtype. Reductions are built for
  // f32 and bf16; another dtype is an Error naming the call and the dtype.
  //
  // In place over n elements. bf16: bf16 on the wire, accumulated in f32.
  void allreduce(View data, int64_t n, ReduceOp op, Algorithm algo = Algorithm::kAuto);
  // src holds size()*count elements; this rank's reduced block lands in dst
  // (count). f32 only for now.
  virtual void reduce_scatter(ConstView src, View dst, int64_t count, ReduceOp op);
  // src holds count elements; dst gets size()*count, rank r's block at
  // r*count. Any dtype: it only moves bytes.
  virtual void allgather(ConstView src, View dst, int64_t count);
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ranks with the same color form a new communicator, ordered by key. A
  // rank passing a negative color joins none and gets nullptr.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Seconds a blocking call may wait before CommError (0: forever). Set it
  // on every rank alike; split() copies it to the new communicator, and the
  // hierarchy's communicators follow it.
  virtual void set_timeout(double seconds);
  double timeout() const { return timeout_; }
  // Blocking calls wait by polling with naps (as wait_yielding does) instead
  // of spinning in the library: for ranks that idle while others on their
  // cores compute (a pipeline's stages; with namespace hosts each rank is its
  // own scheduling group, and a spinning one keeps its share of the cores).
  // split() copies it.
  void set_polite(bool v) { polite_ = v; }
  // Horovod's stall check: every rank announces it reached `what`; rank 0
  // waits up to the timeout and, if some never arrive, throws CommError
  // naming them ("ranks 2, 3 did not reach 'step 12' within 30 s").
  virtual void check_arrival(const std::string& what) = 0;

  // The host layout: the launcher's (ranks sharing memory, host_key) or the
  // one set_ranks_per_host gave. Collective the first time it is asked for.
  const HostLayout& host_layout();
  // Whether the ranks sit on more than one host (the layout, so collective
  // the first time): the ring and the tree then keep segments in flight.
  bool spans_hosts() { return size() > 1 && host_layout().hosts > 1; }
  // The hierarchical all-reduce's sub-communicators, split on first use
  // (collective). Ask on the thread that owns the communicator before a
  // background thread all-reduces with kHierarchical or kAuto (prepare).
  Hierarchy& hierarchy();
  // Finds now, collectively, whatever `algo` will need (layout, splits).
  void prepare(Algorithm algo);
  // Tests and --ranks-per-host: pretend the ranks sit on hosts of these sizes
  // (rank order). Before the layout is first used; sums to size().
  void set_ranks_per_host(std::vector<int> counts);

 protected:
  virtual void mpi_allreduce(float* data, int64_t n, ReduceOp op) = 0;
  // Collective: a number shared exactly by the ranks on this rank's host. The
  // default puts every rank on one host (in-process communicators).
  virtual int host_key() { return 0; }
  double timeout_ = 0;
  bool polite_ = false;

 private:
  void allreduce_bf16(BF16* data, int64_t n, ReduceOp op, Algorithm algo);
  Algorithm resolve(Algorithm algo, size_t bytes);

  std::mutex topology_mu_;
  std::vector<int> ranks_per_host_;  // set_ranks_per_host's, else empty
  std::unique_ptr<HostLayout> layout_;
  std::unique_ptr<Hierarchy> hierarchy_;
};

// Waits for r without holding a core: tests, then yields, then sleeps in
// short naps (a parameter server and its workers may share cores). Honours
// c's timeout.
void wait_yielding(const Communicator& c, Request& r);
// One idle moment of such a wait; `round` counts the caller's empty polls.
void idle(int round);

// Sums a few doubles over ranks (training metrics: counts and loss sums),
// carried as f32 through the library's all-reduce.
void sum_metrics(Communicator& c, double* v, int n);

// Algorithms over point-to-point (comm/ring.cpp, comm/tree.cpp). Every rank
// ends with bitwise the same result (each element is reduced once, by one
// rank, and then copied), which keeps data-parallel replicas identical.
void ring_allreduce(Communicator& c, float* data, int64_t n, ReduceOp op);
void tree_allreduce(Communicator& c, float* data, int64_t n, ReduceOp op);
// bf16 on the wire (half the bytes of f32), each partial sum accumulated in
// f32 and rounded once per hop; the result is rounded once, by its owner.
void ring_allreduce_bf16(Communicator& c, BF16* data, int64_t n, ReduceOp op);
// The same over f32 data in place (gradients with --grad-dtype bf16), each
// rank's values rounded as they are first sent: bitwise what rounding data
// to bf16, ring_allreduce_bf16 and widening back gives, without the copy.
void ring_allreduce_f32_bf16_wire(Communicator& c, float* data, int64_t n, ReduceOp op);
// The ring's halves, used by the default reduce_scatter and allgather.
void ring_reduce_scatter(Communicator& c, const float* src, float* dst, int64_t count,
                         ReduceOp op);
void ring_allgather(Communicator& c, const void* src, void* dst, size_t block_bytes);
// The ring all-reduce's halves in place over data[0, n) cut into size()
// blocks (detail::Blocks): after the first, rank r holds block (r+1) % size()
// summed (and averaged over `divide_by` ranks if op is kAverage); the second
// passes every rank's finished block to all. `network`: the ring crosses
// hosts, so keep several segments in flight (comm/ring.cpp).
void ring_reduce_scatter_inplace(Communicator& c, float* data, int64_t n, ReduceOp op,
                                 int divide_by, bool network = false);
void ring_allgather_inplace(Communicator& c, float* data, int64_t n, bool network = false);
// Hierarchical all-reduce over c.hierarchy() (comm/hierarchical.cpp).
void hierarchical_allreduce(Communicator& c, float* data, int64_t n, ReduceOp op);

}  // namespace cohort::comm
