// The memory estimate and check of memory_plan.h.
#include "train/memory_plan.h"

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <string>

#include "core/error.h"
#include "data/tokens.h"
#include "nn/layers.h"
#include "parallel/zero_layers.h"
#include "parallel/zero_replica.h"

namespace cohort {

namespace {

// What backward keeps beside the modules' outputs (each module's y_, its
// input gradient dx_, copies such as Linear's {rows, I} input, oneDNN's
// workspaces and the bf16 operands), as a multiple of activation_elems.
// Measured (peak_memory_mb of `cohort train --epochs 1 --eval last
// --memory-check off`, one process, fp32, Adam, less the weights, gradients,
// state, data and process below), the factor each run implies:
//   mnist-small  synthetic --limit 256 --batch 128   1.7
//   mnist-large  synthetic --limit 256 --batch 128   5.2 (512: 3.9)
//   gpt2-tiny    text --limit 256 --batch 32         1.9 (8: 1.5)
//   gpt2         text --seq 64 --batch 1             about 1.5 (RSS 2.0 GB during eval)
//   cifar-resnet50 cifar10 --batch 128               about 3 (BENCHMARKS: peaks at 15 GB;
//                                                    this estimate says 18.9)
// 4 keeps every one of these within 20% or above it (mnist-large at 128:
// -12%; gpt2-tiny at 32: +80%, where activations are nearly all there is).
constexpr double kActivationFactor = 4.0;
// The process before any tensor (oneDNN, OpenMP, OpenMPI, the binary):
// lenet at batch 1 peaked at 23 MB alone and 32 MB per rank under mpirun.
constexpr double kProcessBytes = 40e6;
// The loss keeps its probabilities and their gradient: 2 x the logits.
constexpr double kLossCopies = 2;

constexpr double kGB = 1e9;
constexpr double kMiB = 1 << 20;

// The data set a run of images holds (f32, train and test, read in full
// before --limit keeps the first images); token streams are small beside
// any model that takes them and count as 0.
double data_bytes(const nn::ModelSpec& spec, const TrainConfig& cfg) {
  if (spec.input.kind != nn::InputKind::kImage || is_token_dataset(cfg.data)) return 0;
  double images = 0;
  if (cfg.data == "synthetic")
    images = double(cfg.limit > 0 ? cfg.limit : 60000) + 2000;
  else if (cfg.data == "cifar10")
    images = 60000;
  else
    images = 70000;  // fashion-mnist, mnist
  return images * double(numel(spec.input.shape)) * 4;
}

std::string gb(double bytes) { return detail::concat(std::fixed, std::setprecision(1), bytes / kGB); }

// "--parallel zero --zero-stage 2" or "--parallel dp".
std::string ranks_str(int n) { return detail::concat(n, n == 1 ? " rank" : " ranks"); }

std::string strategy_flags(const MemoryPlanInputs& in) {
  return in.strategy == "zero" ? detail::concat("--parallel zero --zero-stage ", in.zero_stage)
                               : "--parallel " + in.strategy;
}

}  // namespace

nlohmann::ordered_json MemoryEstimate::to_json() const {
  return {{"parameters_mb", parameters / kMiB}, {"gradients_mb", gradients / kMiB},
          {"optimizer_state_mb", optimizer_state / kMiB}, {"activations_mb", activations / kMiB},
          {"data_mb", data / kMiB}, {"overhead_mb", overhead / kMiB}, {"total_mb", total() / kMiB}};
}

int optimizer_state_bytes(const std::string& optimizer, float momentum) {
  if (optimizer == "sgd") return momentum != 0 ? 4 : 0;  // Sgd: the momentum buffer only
  return 8;                                              // adam, adamw: two moments
}

MemoryEstimate estimate_memory(const ModelFigures& m, const MemoryPlanInputs& in) {
  const double psi = double(m.params), n = double(std::max(1, in.ranks));
  const double k = in.optimizer_bytes;
  MemoryEstimate e;
  const int stage = in.strategy == "zero" ? in.zero_stage : 0;
  // bf16 gradients on the wire: ZeRO keeps its buckets and the shard's
  // gradients at 2 bytes (parallel/zero_grads.h).
  const bool low = stage >= 1 && in.grad_comm == DType::kBF16 && in.ranks > 1;
  const double grad_bytes = low ? 2 : 4;
  // ZeRO's buckets: two in flight.
  const double buckets = 2 * in.bucket_mb * kMiB * grad_bytes / 4;
  const bool streamed = zero_streams_rows(in.precision) && m.working_set_streamed > 0;
  // A bf16 copy of the weights and f32 masters of the shard, each unit
  // widened as stage 3 gathers it.
  const bool replica = zero_holds_bf16_copy(stage, in.precision, in.ranks);
  const double ws = double(streamed ? m.working_set_streamed : m.working_set);
  // Stage 1 keeps its shard of each all-reduced bucket, unless micro-batches
  // add up whole gradients (zero.h).
  const bool shard_grads = stage >= 2 || (stage == 1 && in.accumulate == 1);
  // Stage 3 also holds the units gathered ahead: up to the prefetch budget
  // beyond the two largest (zero_layers.h).
  const double ahead = stage == 3 && !replica ? std::min(in.prefetch_mb * kMiB, 4 * psi) : 0;
  if (stage == 3 || replica) {  // the copy holds every element but the shard's
    e.parameters = 4 * psi / n + 4 * ws + ahead + (replica ? 2 * psi - 2 * psi / n : 0);
  } else {
    e.parameters = 4 * psi;
  }
  e.gradients = shard_grads ? grad_bytes * psi / n + buckets : 4 * psi;
  e.optimizer_state = stage >= 1 ? k * psi / n : k * psi;
  // bf16: Linear and Conv2d keep a bf16 copy of their weights (most of Psi);
  // under ZeRO a Linear converts at each use into one scratch, which the
  // working set bounds (Conv2d's copies, in models of a few MB, go uncounted).
  if (in.precision == DType::kBF16)
    e.parameters += stage >= 1 ? 2 * ws : 2 * psi;
  const double act_bytes = in.precision == DType::kBF16 ? 2 : 4;
  e.activations = m.activation_elems * act_bytes * kActivationFactor;
  e.data = m.data_bytes;
  e.overhead = kProcessBytes;
  // Stage 3 builds and initializes the whole model on every rank before the
  // other ranks' shards are released: the full 4Psi is resident once during
  // set-up, so its peak is the larger of that and the steady state.
  // The replica is rounded from the whole weights too, before they go.
  if (stage == 3 || replica) {
    const double setup = (replica ? 6 : 4) * psi + e.data + e.overhead;
    if (setup > e.total()) e.parameters += setup - e.total();
  }
  return e;
}

namespace {

// The two largest units ZeRO-3 gathers (top-level layers, or the leaves of
// large ones: parallel/zero_layers.h), less the parameters in [sb, se).
int64_t two_largest(nn::Sequential& layers, const Arena& params, int64_t bucket, int64_t sb,
                    int64_t se) {
  int64_t first = 0, second = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string prefix = layers.child_name(i) + ".";
    bool tied = false;
    for (const Arena::Tie& t : params.ties()) tied = tied || t.name.rfind(prefix, 0) == 0;
    for (const nn::Module* c : zero_units(layers.child(i), tied, bucket)) {
      const int64_t p = c->num_params() - std::max<int64_t>(0, std::min(se, c->param_end()) -
                                                                   std::max(sb, c->param_begin()));
      if (p > first) {
        second = first;
        first = p;
      } else if (p > second) {
        second = p;
      }
    }
  }
  return first + second;
}

}  // namespace

ModelFigures model_figures(const nn::ModelSpec& spec, const TrainConfig& cfg, double bucket_mb) {
  // Registering the layers sizes their ranges; nothing is allocated (count_params).
  std::unique_ptr<nn::Sequential> layers = spec.layers();
  Arena params, buffers;
  nn::ParamRegistry reg{&params, &buffers};
  layers->register_params(reg, "");
  ModelFigures m;
  m.params = params.size();
  const int64_t bucket = std::max<int64_t>(1, int64_t(bucket_mb * kMiB / sizeof(float)));
  m.working_set = two_largest(*layers, params, bucket, 0, 0);
  // GPT-2's head tied to wte: the layers' parameters without the tied
  // matrix, and two of its row blocks (the one in use and the next).
  if (params.ties().size() == 1) {
    const ParamInfo& owner = params.infos()[params.ties()[0].owner];
    const int64_t rows = std::min(owner.shape[0], nn::kTiedBlockRows);
    m.working_set_streamed = two_largest(*layers, params, bucket, owner.offset, owner.offset + owner.numel()) +
                             2 * rows * (owner.numel() / owner.shape[0]);
  }
  Shape in = spec.input.shape;
  in.insert(in.begin(), cfg.batch);
  const Shape out = layers->output_shape(in);
  m.activation_elems = layers->activation_elems(in) + kLossCopies * double(numel(out));
  m.data_bytes = data_bytes(spec, cfg);
  return m;
}

MemoryPlanInputs plan_inputs(const TrainConfig& cfg, const RunSettings& settings, int world) {
  MemoryPlanInputs in;
  in.strategy = world > 1 ? cfg.strategies->under_ranks(cfg.parallel) : cfg.parallel;
  in.zero_stage = settings.zero_stage;
  in.ranks = world;
  in.optimizer_bytes = optimizer_state_bytes(cfg.optimizer, cfg.momentum);
  in.precision = settings.precision.compute;
  in.grad_comm = settings.precision.grad_comm;
  in.accumulate = settings.accumulate;
  in.bucket_mb = settings.bucket_mb;
  in.prefetch_mb = settings.prefetch_mb;
  return in;
}

double available_memory_bytes() {
  double available = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    double kb = 0;
    meminfo >> kb;
    if (key == "MemAvailable:") available = kb * 1024;
    meminfo.ignore(1 << 10, '\n');
  }
  // cgroup v2: "max" (no limit) fails to parse as a number and is skipped.
  std::ifstream cgroup("/sys/fs/cgroup/memory.max");
  double limit = 0;
  if (cgroup >> limit && limit > 0) available = available > 0 ? std::min(available, limit) : limit;
  return available;
}

void check_memory(const ModelFigures& model, const MemoryPlanInputs& in, int local_ranks,
                  double available) {
  const int local = std::max(1, local_ranks);
  const double need = estimate_memory(model, in).total();
  if (available <= 0 || need * local <= available) return;
  std::string fits;
  auto fits_with = [&](const MemoryPlanInputs& alt, int on_machine) {
    const double per = estimate_memory(model, alt).total();
    if (per * on_machine > available) return false;
    fits = detail::concat("; ", strategy_flags(alt),
                          alt.ranks != in.ranks ? " on " + ranks_str(alt.ranks) : "",
                          " needs about ", gb(per), " GB per rank (", gb(per * on_machine),
                          " GB) and would fit");
    return true;
  };
  // A higher ZeRO stage at the same ranks, else fewer ranks of the same run.
  bool found = false;
  if (in.ranks > 1)
    for (int stage = in.strategy == "zero" ? in.zero_stage + 1 : 1; stage <= 3 && !found; ++stage) {
      MemoryPlanInputs alt = in;
      alt.strategy = "zero";
      alt.zero_stage = stage;
      found = fits_with(alt, local);
    }
  for (int n = local - 1; n >= 1 && !found; --n) {
    MemoryPlanInputs alt = in;
    alt.ranks = std::max(1, in.ranks - (local - n));
    found = fits_with(alt, n);
  }
  if (!found) fits = "; not even one rank fits: try a smaller --batch (or --seq) or model";
  throw InputError(detail::concat(
      strategy_flags(in), " on ", ranks_str(in.ranks), " needs about ", gb(need), " GB per rank (",
      gb(need * local), " GB for the ", ranks_str(local), " on this machine) but ", gb(available),
      " GB is available", fits, " (--memory-check off runs it anyway)"));
}

}  // namespace cohort
