// A loopback communicator for tests: rank 0 of 2, whose peer answers every
// message with the bytes it was sent. It records what goes on the wire,
// in-process and without MPI (tests/comm/bytes_test.cpp,
// tests/parallel/grad_reduce_test.cpp).
#pragma once
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "comm/communicator.h"

namespace cohort::comm {

class Loopback final : public Communicator {
 public:
  // Both ranks on one host, given rather than found: the layout's exchange
  // would count on the wire, and the ring asks for it (spans_hosts).
  Loopback() { set_ranks_per_host({2}); }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void send(const void*, size_t bytes, int, int) override { sent += bytes; }
  void recv(void*, size_t bytes, int, int) override { received += bytes; }
  std::unique_ptr<Request> isend(const void*, size_t, int, int) override { return nullptr; }
  std::unique_ptr<Request> irecv(void*, size_t, int, int) override { return nullptr; }
  bool probe(int, int) override { return false; }
  void sendrecv(const void* sbuf, size_t sbytes, int, void* rbuf, size_t rbytes, int,
                int) override {
    sent += sbytes;
    received += rbytes;
    std::memcpy(rbuf, sbuf, std::min(sbytes, rbytes));
  }
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}
  std::unique_ptr<Communicator> split(int, int) override { return nullptr; }
  void check_arrival(const std::string&) override {}
  size_t sent = 0, received = 0;

 protected:
  void mpi_allreduce(float*, int64_t n, ReduceOp) override { sent += size_t(n) * 4; }
};

}  // namespace cohort::comm
