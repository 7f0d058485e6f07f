#include "optim/precision.h"

#include <sstream>

#include "core/error.h"

namespace cohort {
namespace {

DType parse(const char* flag, const std::string& v, bool allow_f16) {
  if (v == "fp32" || v == "f32") return DType::kF32;
  if (v == "bf16") return DType::kBF16;
  if (allow_f16 && (v == "fp16" || v == "f16")) return DType::kF16;
  throw InputError(detail::concat(flag, ": unknown choice '", v, "' (valid: fp32, bf16",
                                  allow_f16 ? ", fp16)" : ")"));
}

}  // namespace

const char* precision_name(DType t) {
  switch (t) {
    case DType::kF32: return "fp32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "fp16";
    default: return dtype_name(t);
  }
}

void PrecisionFlags::add_to(CLI::App& app) {
  app.add_option("--precision", precision,
                 "fp32 | bf16 | fp16: the model's arithmetic (fp32 master weights either way)");
  app.add_option("--grad-dtype", grad_dtype,
                 "fp32 | bf16: data-parallel gradients on the wire (DeepSpeed's "
                 "communication_data_type)");
  app.add_option("--loss-scale", scaling.loss_scale, "fp16: fixed loss scale (0: dynamic)");
  app.add_option("--initial-scale-power", scaling.initial_scale_power,
                 "fp16 dynamic scaling starts at 2^this");
  app.add_option("--loss-scale-window", scaling.loss_scale_window,
                 "fp16: clean steps before the scale doubles");
  app.add_option("--hysteresis", scaling.hysteresis,
                 "fp16: overflows in a row before the scale halves");
  app.add_option("--min-loss-scale", scaling.min_loss_scale, "fp16: the scale's floor");
}

Precision PrecisionFlags::resolve() const {
  Precision p;
  p.compute = parse("--precision", precision, true);
  p.grad_comm = parse("--grad-dtype", grad_dtype, false);
  p.scaling = scaling;
  const auto& s = scaling;
  COHORT_INPUT_CHECK(s.loss_scale >= 0, "--loss-scale must be 0 (dynamic) or more, got ",
                     s.loss_scale);
  COHORT_INPUT_CHECK(s.initial_scale_power >= 0 && s.initial_scale_power <= 64,
                     "--initial-scale-power must be 0..64, got ", s.initial_scale_power);
  COHORT_INPUT_CHECK(s.loss_scale_window >= 1, "--loss-scale-window must be at least 1, got ",
                     s.loss_scale_window);
  COHORT_INPUT_CHECK(s.hysteresis >= 1, "--hysteresis must be at least 1, got ", s.hysteresis);
  COHORT_INPUT_CHECK(s.min_loss_scale > 0, "--min-loss-scale must be positive, got ",
                     s.min_loss_scale);
  return p;
}

std::string PrecisionFlags::describe() const {
  std::ostringstream os;
  os << "--precision " << precision << "\n--grad-dtype " << grad_dtype << "\n--loss-scale "
     << scaling.loss_scale << "\n--initial-scale-power " << scaling.initial_scale_power
     << "\n--loss-scale-window " << scaling.loss_scale_window << "\n--hysteresis "
     << scaling.hysteresis << "\n--min-loss-scale " << scaling.min_loss_scale << "\n";
  return os.str();
}

}  // namespace cohort
