// Gradients summed over ranks with f32 or bf16 on the wire (--grad-dtype,
// DeepSpeed's communication_data_type). The gradient arena stays f32; with
// bf16 on the ring each value is rounded as it is sent and the result
// widened in place (partial sums in f32, comm/ring.cpp); the tree and MPI
// round the range into a scratch buffer and widen it back.
// Data parallelism reduces its buckets through it, hybrid its stage's range.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/communicator.h"

namespace cohort {

class GradReducer {
 public:
  // wire: f32 or bf16. With bf16, kAuto means the ring, the one algorithm
  // that keeps bf16 on the wire (tree and mpi widen it to f32 to reduce).
  GradReducer(DType wire, comm::Algorithm algo);

  // grads[0, n) in place over c. One call at a time (it owns one scratch).
  void allreduce(comm::Communicator& c, float* grads, int64_t n, comm::ReduceOp op);

  DType wire() const { return wire_; }

 private:
  DType wire_;
  comm::Algorithm algo_;
  std::vector<BF16> scratch_;
};

}  // namespace cohort
