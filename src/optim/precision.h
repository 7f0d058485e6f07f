// Mixed precision, as PyTorch AMP and DeepSpeed's `bf16` / `fp16` sections
// define it: the model computes in bf16 or fp16, the flat arena keeps the fp32
// master weights the optimizer updates, and fp16 multiplies the loss by a
// scale (dynamic by default) so small gradients survive fp16's range.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "core/dtype.h"

namespace cohort {

// DeepSpeed's fp16 section: loss_scale 0 means dynamic, starting at
// 2^initial_scale_power; an overflowing step is skipped and, after
// `hysteresis` overflows in a row, the scale halves (never below
// min_loss_scale); after loss_scale_window clean steps it doubles.
struct LossScaleConfig {
  float loss_scale = 0;  // 0: dynamic; > 0: this fixed scale
  int initial_scale_power = 16;
  int loss_scale_window = 1000;
  int hysteresis = 2;
  float min_loss_scale = 1;
};

struct Precision {
  DType compute = DType::kF32;    // the model's arithmetic: f32, bf16 or f16
  DType grad_comm = DType::kF32;  // data-parallel gradients on the wire: f32 or bf16
  LossScaleConfig scaling;        // fp16 only
  bool scaled() const { return compute == DType::kF16; }
};

// The flags, as given; resolve() checks them (InputError naming the flag).
struct PrecisionFlags {
  std::string precision = "fp32";
  std::string grad_dtype = "fp32";
  LossScaleConfig scaling;

  void add_to(CLI::App& app);
  Precision resolve() const;
  // "--name value" lines, compared across ranks at start.
  std::string describe() const;
};

// "fp32" for kF32 and so on: the names the flags take.
const char* precision_name(DType t);

}  // namespace cohort
