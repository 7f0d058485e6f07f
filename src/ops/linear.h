// Fully connected layer. src {N, I}, weight {O, I} (PyTorch layout), bias {O}, dst {N, O}.
// Built for one shape and dtype; operands are typed views (see ops/conv2d.h).
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace cohort::ops {

struct LinearShape {
  int64_t n, in, out;
  DType dtype = DType::kF32;
  double forward_flops() const { return 2.0 * n * in * out; }
};

class Linear {
 public:
  virtual ~Linear() = default;
  // dst = relu?(src weight^T + bias); bias may be null.
  virtual void forward(ConstView src, ConstView weight, ConstView bias, View dst) = 0;
  virtual void backward_data(ConstView ddst, ConstView weight, View dsrc) = 0;
  virtual void backward_weights(ConstView src, ConstView ddst, View dweight, View dbias,
                                bool accumulate) = 0;
};

std::unique_ptr<Linear> make_linear(Device device, const LinearShape& shape, bool relu);

// bf16 runs: whether each Linear keeps its weight's bf16 copy from forward to
// backward_data (true, the default: one conversion a step, 2 bytes a weight
// held all run) or converts at every use into one scratch a thread's linears
// share (false: one more pass over the weight a step). ZeRO stage 3 sets
// false while it runs: its ranks hold 4 Psi/N bytes of weights, and copies of
// every layer would add 2 Psi (gpt2: 162 MB a rank, measured).
void set_keep_bf16_weights(bool keep);

}  // namespace cohort::ops
