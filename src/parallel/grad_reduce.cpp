#include "parallel/grad_reduce.h"

#include "core/error.h"

namespace cohort {

GradReducer::GradReducer(DType wire, comm::Algorithm algo) : wire_(wire), algo_(algo) {
  COHORT_CHECK(wire == DType::kF32 || wire == DType::kBF16, "gradient wire dtype ",
               dtype_name(wire));
  if (wire_ == DType::kBF16 && algo_ == comm::Algorithm::kAuto) algo_ = comm::Algorithm::kRing;
}

void GradReducer::allreduce(comm::Communicator& c, float* grads, int64_t n, comm::ReduceOp op) {
  if (wire_ == DType::kF32 || c.size() == 1 || n == 0) {
    c.allreduce(grads, n, op, algo_);  // one rank: nothing to send, nothing to round
    return;
  }
  if (algo_ == comm::Algorithm::kRing) {
    comm::ring_allreduce_f32_bf16_wire(c, grads, n, op);
    return;
  }
  if (scratch_.size() < size_t(n)) scratch_.resize(size_t(n));
  f32_to_bf16(grads, scratch_.data(), size_t(n));
  c.allreduce(scratch_.data(), n, op, algo_);
  bf16_to_f32(scratch_.data(), grads, size_t(n));
}

}  // namespace cohort
