#include "bench/step_bench.h"

#include <omp.h>

#include <cmath>
#include <cstdio>

#include "bench/peak.h"
#include "bench/peer.h"
#include "core/atomic_file.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/timeline.h"
#include "data/dataset.h"
#include "nn/models/zoo.h"
#include "ops/bf16_kernels.h"
#include "optim/optimizer.h"
#include "parallel/start.h"
#include "parallel/timeline_file.h"

namespace cohort {

namespace {

// The model the flags name: its registered spec at --seq / --vocab / --resize.
std::shared_ptr<const nn::ModelSpec> step_model(const StepBenchConfig& cfg) {
  auto spec = nn::find_model(cfg.model, cfg.seq, cfg.vocab);
  return cfg.resize > 0 ? nn::with_image_size(spec, cfg.resize) : spec;
}

// The flags, checked; the strategy --parallel names, over `model`.
std::unique_ptr<Strategy> make_step_strategy(const StepBenchConfig& cfg, comm::Communicator* comm,
                                             nn::Model& model, Optimizer& opt) {
  const int world = comm ? comm->size() : 1;
  RunSettings run;
  run.model = step_model(cfg);
  run.freeze = cfg.freeze;
  run.batch = cfg.batch;
  run.precision = cfg.precision.resolve();
  cfg.strategies->check(cfg.parallel, run, world);
  if (comm)
    check_and_broadcast(*comm, model, "bench step " + cfg.model + " " +
                                          std::to_string(cfg.batch) + " " + cfg.freeze + " " +
                                          std::to_string(cfg.resize) + "\n" + cfg.parallel + "\n" +
                                          cfg.precision.describe() +
                                          cfg.strategies->describe());
  StrategyArgs args{run, comm, model, opt};
  auto strategy = cfg.strategies->find(cfg.parallel).make(cfg.parallel, args);
  // The peer runs DDP over as many ranks: a like-for-like row only where
  // every rank trains on its own data.
  COHORT_INPUT_CHECK(cfg.peer.empty() || strategy->data_world() == world,
                     "--peer pytorch: --parallel ", cfg.parallel,
                     " has no PyTorch counterpart in bench step (use bench strategies)");
  return strategy;
}

// One batch of synthetic input for `model`: random images, or random token
// ids with random next-token targets.
Dataset synthetic_batch(const nn::Model& model, int64_t n) {
  const Shape& in = model.input_shape();
  if (model.spec().input.kind == nn::InputKind::kImage)
    return make_synthetic(n, int(in[0]), int(in[1]), int(in[2]), 10, 7);
  Dataset d;
  d.images = Tensor::empty({n, in[0]}, DType::kI32);
  Rng rng(7);
  const uint64_t v = uint64_t(model.num_classes());
  for (int64_t i = 0; i < d.images.numel(); ++i) d.images.i32()[i] = int32_t(rng.below(v));
  d.labels.resize(size_t(d.images.numel()));
  for (auto& l : d.labels) l = int32_t(rng.below(v));
  d.num_classes = model.num_classes();
  return d;
}

struct Timing {
  double seconds = 0;
  StepTimes times;
  int64_t first_step_bytes = 0;  // tensors the first step allocated: activations, gradients of them
};

// Validates (training steps on one batch must give finite, falling loss),
// then times cfg.steps steps after the warm-up.
Timing time_steps(const StepBenchConfig& cfg, comm::Communicator* comm, Strategy& strategy,
                  const Batch& batch) {
  Timing t;
  double first = 0;
  {
    auto counter = std::make_shared<MemoryCounter>();
    CountAllocations count(counter);
    first = strategy.step(batch, 1e-3f, t.times).loss_sum;
    t.first_step_bytes = counter->peak();
  }
  for (int i = 1; i < cfg.warmup; ++i) strategy.step(batch, 1e-3f, t.times);
  if (comm) comm->barrier();
  std::unique_ptr<TimelineFile> trace;  // --timeline: the timed steps only
  if (!cfg.timeline.empty()) trace = std::make_unique<TimelineFile>(cfg.timeline, comm);
  t.times = StepTimes{};
  Timer timer;
  double last = 0;
  for (int i = 0; i < cfg.steps; ++i) {
    timeline::Span span("step", "step", "step", i + 1);
    last = strategy.step(batch, 1e-3f, t.times).loss_sum;
  }
  if (comm) comm->barrier();
  t.seconds = timer.seconds();
  COHORT_CHECK(std::isfinite(last) && last < first, "bench step: loss did not fall (", first,
               " -> ", last, "): the step is wrong, not timing it");
  if (trace) trace->write();
  return t;
}

// The peak and the peer, beside cohort's figure (rank 0).
void add_comparisons(const StepBenchConfig& cfg, int world, double ips, double gflops,
                     nlohmann::ordered_json& out) {
  const DType compute = cfg.precision.resolve().compute;
  if (cfg.peak) {
    const DType dtype = peak_dtype(compute);
    const double peak = measure_matmul_gflops(dtype);
    out["matmul_peak_dtype"] = precision_name(dtype);
    out["matmul_peak_gflops"] = peak;
    out["peak_share"] = gflops / peak;
    // bf16 where oneDNN has no bf16 kernel: both sides run f32 kernels on bf16 storage.
    const bool fallback = dtype == DType::kBF16 && !ops::bf16_kernels_native();
    if (fallback) out["matmul_peak_kernels"] = "f32 on bf16 storage";
    std::fprintf(stderr, "%s matmul peak%s %.1f GFLOP/s; %s reaches %.1f%% of it\n",
                 precision_name(dtype), fallback ? " (f32 kernels on bf16 storage)" : "", peak,
                 cfg.model.c_str(), 100 * gflops / peak);
  }
  if (cfg.peer == "pytorch") {
    std::vector<std::string> args = {"step", "--model", cfg.model, "--batch",
                                      std::to_string(cfg.batch), "--threads",
                                      std::to_string(cfg.threads), "--steps",
                                      std::to_string(cfg.steps), "--warmup",
                                      std::to_string(cfg.warmup), "--world", std::to_string(world),
                                      "--precision", precision_name(compute)};
    for (auto [flag, v] : {std::pair{"--seq", cfg.seq}, std::pair{"--vocab", cfg.vocab},
                           std::pair{"--image-size", cfg.resize}})
      if (v > 0) args.insert(args.end(), {flag, std::to_string(v)});
    if (cfg.freeze != "none") args.insert(args.end(), {"--freeze", cfg.freeze});
    auto p = run_peer(args);
    const double pips = p.at("images_per_second").get<double>();
    out["peer"] = "pytorch";
    out["peer_precision"] = p.value("precision", "fp32");
    out["peer_images_per_second"] = pips;
    if (p.contains("tokens_per_second")) out["peer_tokens_per_second"] = p["tokens_per_second"];
    if (p.contains("peak_memory_mb")) out["peer_peak_memory_mb"] = p["peak_memory_mb"];
    out["ratio"] = ips / pips;
    std::fprintf(stderr, "pytorch: %.0f images/s; cohort/pytorch = %.2fx\n", pips, ips / pips);
  }
}

}  // namespace

nlohmann::ordered_json run_step_bench(const StepBenchConfig& cfg, comm::Communicator* comm) {
  COHORT_INPUT_CHECK(cfg.batch >= 1, "--batch must be at least 1, got ", cfg.batch);
  COHORT_INPUT_CHECK(cfg.threads >= 1, "--threads must be at least 1, got ", cfg.threads);
  COHORT_INPUT_CHECK(cfg.steps >= 1, "--steps must be at least 1, got ", cfg.steps);
  COHORT_INPUT_CHECK(cfg.peer.empty() || cfg.peer == "pytorch", "--peer: unknown peer '",
                     cfg.peer, "' (valid: pytorch)");
  // PyTorch's CPU autocast (1.13) has bf16 only: no like-for-like fp16 row.
  COHORT_INPUT_CHECK(cfg.peer.empty() || cfg.precision.resolve().compute != DType::kF16,
                     "--precision fp16: --peer pytorch has no fp16 on the CPU (its autocast "
                     "runs bf16 only); use --precision bf16 or fp32, or drop --peer");
  if (!cfg.timeline.empty()) check_writable("--timeline", cfg.timeline);
  omp_set_num_threads(cfg.threads);
  auto model = nn::build_model(step_model(cfg), 0);
  model->freeze(cfg.freeze);
  Dataset d = synthetic_batch(*model, cfg.batch);
  auto opt = make_optimizer("adam", 0, 0);
  auto strategy = make_step_strategy(cfg, comm, *model, *opt);
  const Timing t = time_steps(cfg, comm, *strategy, d);
  const int world = comm ? comm->size() : 1;
  // Images the job trains on per second: stages of one pipeline share a batch.
  const double ips = double(cfg.batch) * strategy->data_world() * cfg.steps / t.seconds;
  // Other ranks wait (sleeping, in the communicator's barrier) while rank 0
  // reports and runs the peer, so they take no CPU from it.
  if (comm && comm->rank() != 0) {
    comm->barrier();
    return {};
  }
  const double gflops = ips * 3.0 * model->forward_flops_per_image() / 1e9;  // fwd + bwd
  nlohmann::ordered_json out = {{"event", "bench"}, {"model", cfg.model}, {"batch", cfg.batch},
                                {"input", shape_str(model->input_shape())}, {"freeze", cfg.freeze},
                                {"threads", cfg.threads}, {"workers", world}, {"steps", cfg.steps},
                                {"images_per_second", ips}, {"gflops", gflops},
                                {"precision", precision_name(cfg.precision.resolve().compute)},
                                {"activation_bytes_per_image",
                                 double(t.first_step_bytes) / double(cfg.batch)}};
  if (comm) {
    out["parallel"] = cfg.parallel;
    out["step_ms"] = {{"compute", 1e3 * t.times.compute / cfg.steps},
                      {"communication_wait", 1e3 * t.times.comm / cfg.steps}};
  }
  std::fprintf(stderr,
               "cohort:  %s batch %lld, %d rank(s) x %d thread(s), %s: %.0f images/s, %.1f GFLOP/s, "
               "%.0f KiB of activations per image\n",
               cfg.model.c_str(), (long long)cfg.batch, world, cfg.threads,
               precision_name(cfg.precision.resolve().compute), ips, gflops,
               double(t.first_step_bytes) / double(cfg.batch) / 1024);
  if (model->spec().input.kind == nn::InputKind::kTokens) {
    const double tokens = ips * double(model->input_shape()[0]);
    out["tokens_per_second"] = tokens;
    out["peak_memory_mb"] = peak_rss_mb();
    std::fprintf(stderr, "cohort:  %.0f tokens/s, peak RSS %.0f MB\n", tokens, peak_rss_mb());
  }
  add_comparisons(cfg, world, ips, gflops, out);
  if (out.contains("peer_tokens_per_second"))
    std::fprintf(stderr, "pytorch: %.0f tokens/s, peak RSS %.0f MB\n",
                 out["peer_tokens_per_second"].get<double>(),
                 out.value("peer_peak_memory_mb", 0.0));
  std::printf("%s\n", out.dump().c_str());
  std::fflush(stdout);
  if (comm) comm->barrier();
  return out;
}

}  // namespace cohort
