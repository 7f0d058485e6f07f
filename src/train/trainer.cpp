// `cohort train`: set up (threads, model, data, checkpoint, ranks' agreement,
// optimizer, strategy, sampler, schedule), then epochs of steps, each epoch
// summed over ranks, evaluated and saved, then the run's summary.
#include "train/trainer.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <thread>
#include <cmath>
#include <cstdio>

#include "core/atomic_file.h"
#include "core/clock.h"
#include "core/cpus.h"
#include "core/memory.h"
#include "core/timeline.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/prefetch.h"
#include "data/sampler.h"
#include "data/tokens.h"
#include "nn/models/zoo.h"
#include "ops/bf16_kernels.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "parallel/launch.h"
#include "parallel/start.h"
#include "parallel/timeline_file.h"
#include "train/checkpoint.h"
#include "train/commits.h"
#include "train/evaluate.h"
#include "train/memory_plan.h"
#include "train/report.h"
#include "train/resume.h"

namespace cohort {

constexpr int kMaxThreadsPerCpu = 8;

std::vector<std::string> class_names(const std::string& dataset) {
  if (dataset == "fashion-mnist")
    return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
            "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  if (dataset == "cifar10")
    return {"airplane", "automobile", "bird", "cat", "deer",
            "dog",      "frog",       "horse", "ship", "truck"};
  return {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
}

// --global-batch G: a copy whose per-rank --batch is G / (world x --accumulate);
// InputError where that does not divide.
TrainConfig with_global_batch(const TrainConfig& cfg, int world) {
  TrainConfig c = cfg;
  COHORT_INPUT_CHECK(c.global_batch >= 0, "--global-batch must be 0 (off) or more, got ",
                     c.global_batch);
  if (c.global_batch == 0) return c;
  const int64_t parts = int64_t(world) * std::max(1, c.accumulate);
  COHORT_INPUT_CHECK(c.global_batch % parts == 0, "--global-batch ", c.global_batch,
                     " does not divide over ", world, " ranks x --accumulate ", c.accumulate,
                     "; give a multiple of ", parts);
  c.batch = c.global_batch / parts;
  return c;
}

void check_config(const TrainConfig& given, int world) {
  const TrainConfig c = with_global_batch(given, world);
  COHORT_INPUT_CHECK(c.commit_every >= 0 || c.commit_every == kCommitAuto,
                     "--commit-every must be auto, 0 (off) or more, got ", c.commit_every);
  COHORT_INPUT_CHECK(c.stop_after_steps >= 0, "--stop-after-steps must be 0 (off) or more, got ",
                     c.stop_after_steps);
  COHORT_INPUT_CHECK(c.epochs >= 1, "--epochs must be at least 1, got ", c.epochs);
  COHORT_INPUT_CHECK(c.batch >= 1, "--batch must be at least 1, got ", c.batch);
  COHORT_INPUT_CHECK(c.lr > 0, "--lr must be positive, got ", c.lr);
  COHORT_INPUT_CHECK(c.threads >= 0, "--threads must be 0 (all) or more, got ", c.threads);
  // More threads than a few per CPU only thrash (and 10,000 never finished).
  const int max_threads = kMaxThreadsPerCpu * usable_cpus();
  COHORT_INPUT_CHECK(c.threads <= max_threads, "--threads ", c.threads, " exceeds ", max_threads,
                     " (", kMaxThreadsPerCpu, " per CPU of this machine)");
  COHORT_INPUT_CHECK(c.clip_norm >= 0, "--clip must be 0 (off) or more, got ", c.clip_norm);
  COHORT_INPUT_CHECK(c.limit >= 0, "--limit must be 0 (all) or more, got ", c.limit);
  COHORT_INPUT_CHECK(c.limit == 0 || c.batch <= c.limit * c.repeat, "--batch ", c.batch,
                     " exceeds the ", c.limit * c.repeat, " training images of --limit ", c.limit);
  COHORT_INPUT_CHECK(c.repeat >= 1, "--repeat must be at least 1, got ", c.repeat);
  COHORT_INPUT_CHECK(c.load.empty() || c.resume.empty(),
                     "--load and --resume exclude each other (--resume restores the weights too)");
  COHORT_INPUT_CHECK(c.accumulate >= 1, "--accumulate must be at least 1, got ", c.accumulate);
  COHORT_INPUT_CHECK(c.timeout >= 0, "--timeout must be 0 (off) or more, got ", c.timeout);
  COHORT_INPUT_CHECK(c.memory_check == "on" || c.memory_check == "off",
                     "--memory-check: unknown choice '", c.memory_check, "' (valid: on, off)");
  COHORT_INPUT_CHECK(c.eval == "epoch" || c.eval == "last" || c.eval == "none",
                     "--eval: unknown choice '", c.eval, "' (valid: epoch, last, none)");
  if (!c.timeline.empty()) check_writable("--timeline", c.timeline);
  c.strategies->check(c.parallel, c.run_settings(), world);
}

namespace {

// Where a run's bf16 arithmetic runs (ops/bf16_kernels.h), for its start line
// and summary: "none" at another precision.
const char* bf16_kernels(const std::string& precision) {
  if (precision != "bf16") return "none";
  return ops::bf16_kernels_native() ? "oneDNN bf16" : "f32 on bf16 storage";
}

// What a run is made of, once set up.
struct Run {
  std::unique_ptr<nn::Model> model;
  DataSplit data;
  ImageTransform images;  // --resize, --augment (data/augment.h)
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<Strategy> strategy;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<Schedule> schedule;
  int64_t global_batch = 0;
  RunPosition start;  // where a resumed run continues (epoch 0 for a new one)
  MemoryEstimate memory;   // per rank, before the model was built
  int ranks_on_machine = 1;
  double available = 0;    // bytes, when the estimate was checked
};

// What the epochs add up, for the summary.
struct Totals {
  std::vector<double> epoch_seconds, epoch_ips;
  double images = 0, seconds = 0, data_s = 0;
  StepTimes times;
  int64_t updates = 0, micro = 0;
  int64_t commits = 0;
  double commit_s = 0;  // wall time inside commits, every rank's wait included
  CommitPlan plan{0, 0};                // when commits within an epoch fall
  ProgressBeacon* beacon = nullptr;     // the update reached, for an elastic supervisor
  EvalResult eval;
};

// Token models read token streams (--data text | tokens), image models images.
DataSplit load_data(const TrainConfig& cfg, const nn::Model& model, const ImageTransform& images) {
  const Shape& in = model.input_shape();
  const bool token_model = model.spec().input.kind == nn::InputKind::kTokens;
  if (token_model || is_token_dataset(cfg.data)) {
    COHORT_INPUT_CHECK(!cfg.augment, "--augment: --data ", cfg.data, " holds tokens, not images");
    COHORT_INPUT_CHECK(token_model, "--model ", cfg.model, " takes ", shape_str(in),
                       " images (HWC), not the token stream of --data ", cfg.data);
    COHORT_INPUT_CHECK(is_token_dataset(cfg.data), "--model ", cfg.model,
                       " takes token ids (--data text | tokens), not --data ", cfg.data);
    DataSplit data =
        load_token_dataset(cfg.data, cfg.data_path, cfg.limit, in[0], model.num_classes());
    // Text's 256 byte values are ids of a larger vocabulary too; evaluate()
    // reads the width of the model's output from num_classes.
    data.train.num_classes = data.test.num_classes = model.num_classes();
    return data;
  }
  // Synthetic images are made at the model's stored size; --resize scales them as any.
  const Shape stored = cfg.resize > 0 ? nn::find_model(cfg.model)->input.shape : in;
  DataSplit data = load_dataset(cfg.data, cfg.data_dir, cfg.limit, stored);
  const Shape img(data.train.images.shape().begin() + 1, data.train.images.shape().end());
  const Shape fed = images.output_shape(img);
  COHORT_INPUT_CHECK(fed == in, "--model ", cfg.model, " takes ", shape_str(in),
                     " images (HWC) but --data ", cfg.data, " has ", shape_str(img),
                     cfg.resize > 0 ? " resized to " + shape_str(fed) : std::string(""));
  return data;
}

// The schedule over the whole run: steps per epoch from this rank's sampler.
std::unique_ptr<Schedule> plan_schedule(const TrainConfig& cfg, const Sampler& sampler) {
  const int64_t micro_per_epoch = sampler.size() / cfg.batch + (sampler.size() % cfg.batch != 0);
  const int64_t steps_per_epoch = std::max<int64_t>(1, micro_per_epoch / cfg.accumulate);
  ScheduleOptions so;
  so.lr = cfg.lr;
  so.warmup_steps = cfg.warmup_steps;
  so.total_steps = cfg.total_steps > 0 ? cfg.total_steps : steps_per_epoch * cfg.epochs;
  so.min_lr = cfg.min_lr;
  so.step_size = steps_per_epoch;
  return make_schedule(cfg.schedule, so);
}

Run set_up(const TrainConfig& cfg, comm::Communicator* comm) {
  // An output that cannot be written is found now, not after an epoch's work.
  if (!cfg.save.empty()) check_writable("--save", cfg.save);
  Run run;
  const RunSettings settings = cfg.run_settings();
  // Before any arena is allocated: a run that cannot fit is refused in seconds.
  const ModelFigures figures = model_figures(*settings.model, cfg, settings.bucket_mb);
  const MemoryPlanInputs plan = plan_inputs(cfg, settings, comm ? comm->size() : 1);
  run.memory = estimate_memory(figures, plan);
  run.ranks_on_machine = comm ? std::min(comm->size(), ranks_on_this_node()) : 1;
  run.available = available_memory_bytes();
  if (cfg.memory_check == "on") check_memory(figures, plan, run.ranks_on_machine, run.available);
  run.model = nn::build_model(settings.model, cfg.seed);
  run.model->freeze(cfg.freeze);
  run.images = ImageTransform::for_dataset(cfg.data, cfg.resize, cfg.augment, cfg.seed);
  run.data = load_data(cfg, *run.model, run.images);
  if (cfg.test_limit > 0 && cfg.test_limit < run.data.test.size())
    run.data.test = run.data.test.slice(0, cfg.test_limit);
  COHORT_INPUT_CHECK(cfg.batch <= run.data.train.size() * cfg.repeat, "--batch ", cfg.batch,
                     " exceeds the ", run.data.train.size() * cfg.repeat, " training images of --data ",
                     cfg.data);
  if (comm) check_and_broadcast(*comm, *run.model, cfg.describe());
  run.opt = make_optimizer(cfg.optimizer, cfg.weight_decay, cfg.momentum, cfg.beta1, cfg.beta2,
                           cfg.eps);
  StrategyArgs args{settings, comm, *run.model, *run.opt};
  run.strategy = cfg.strategy().make(cfg.parallel, args);
  // --load, --resume: every rank reads the file, and its range of the optimizer state.
  run.start = restore_checkpoint(cfg, *run.model, *run.opt, run.strategy->optimizer_range(),
                                 !comm || comm->rank() == 0);
  // An fp16 run resumed at fp16 continues its loss scale where it stood.
  LossScaler* scaler = run.strategy->loss_scaler();
  if (scaler && !run.start.loss_scale.empty())
    scaler->restore(run.start.loss_scale, "checkpoint " + cfg.resume);
  // The dropout generators continue their streams: each rank its own where
  // the world is the same; at another world rank r takes rank r mod W's
  // (a continued stream, but no uninterrupted run drew those masks).
  if (Rng* rng = run.strategy->dropout_rng(); rng && !run.start.rngs.empty()) {
    const size_t r = size_t(comm ? comm->rank() : 0);
    set_rng_state(*rng, run.start.rngs[r % run.start.rngs.size()]);
  }
  const Strategy& s = *run.strategy;
  run.sampler = std::make_unique<Sampler>(run.data.train.size(), s.data_rank(), s.data_world(),
                                          cfg.repeat, cfg.seed, true);
  run.schedule = plan_schedule(cfg, *run.sampler);
  run.global_batch = cfg.batch * s.data_world() * cfg.accumulate;
  COHORT_INPUT_CHECK(cfg.global_batch == 0 || run.global_batch == cfg.global_batch,
                     "--global-batch ", cfg.global_batch, ": --parallel ", cfg.parallel,
                     " feeds data to ", s.data_world(), " of its ", s.world(),
                     " ranks; --global-batch needs every rank to take data (dp, zero)");
  return run;
}

// Evaluates this rank's shard of the test set and sums over ranks.
EvalResult evaluate_all(Run& run, int64_t batch) {
  Strategy& strategy = *run.strategy;
  const Dataset& test = run.data.test;
  const int64_t b = test.size() * strategy.rank() / strategy.world();
  const int64_t e = test.size() * (strategy.rank() + 1) / strategy.world();
  // No larger than the training batch: every rank runs the whole model here,
  // and a big model's activations at 256 (ResNet-50 at 32x32: several GB per
  // rank) must fit beside the other ranks on one machine.
  // Every rank runs the same number of batches: under ZeRO stage 3 each
  // forward gathers the layers' parameters from all ranks.
  const int64_t size = std::min<int64_t>(256, batch);
  const int64_t smallest = test.size() / strategy.world();
  const int64_t largest = (test.size() + strategy.world() - 1) / strategy.world();
  const int64_t batches = std::min((largest + size - 1) / size, smallest);
  EvalResult mine = evaluate(*run.model, test.slice(b, e), size, batches, &run.images);
  std::vector<double> v = mine.to_sums();
  strategy.sum(v.data(), int(v.size()));
  return EvalResult::from_sums(v);
}

// The fp16 loss scaler's state for a checkpoint ("" when none).
std::string scale_state(Strategy& s) {
  const LossScaler* scaler = s.loss_scaler();
  return scaler ? scaler->state() : "";
}

// Every rank's dropout generator state, in rank order (collective; empty
// where rank 0's strategy has none).
std::vector<RngState> gather_rngs(comm::Communicator* comm, Strategy& strategy) {
  const Rng* mine = strategy.dropout_rng();
  const int world = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
  int64_t has = mine ? 1 : 0;
  if (comm) comm->broadcast(&has, sizeof has, 0);
  if (!has) return {};
  std::vector<RngState> all(size_t(world), RngState{});
  if (mine) all[size_t(rank)] = rng_state(*mine);
  for (int r = 0; comm && r < world; ++r) comm->broadcast(all[size_t(r)].data(), sizeof(RngState), r);
  return all;
}

// Commits the run at `at` to --checkpoint-dir (collective; timed into t for
// the summary), then rank 0 keeps the newest kCommitsKept.
void commit(const TrainConfig& cfg, comm::Communicator* comm, Run& run, RunPosition at,
            Totals& t) {
  Timer timer;
  at.rngs = gather_rngs(comm, *run.strategy);
  TrainConfig to = cfg;
  to.save = commit_path(cfg.checkpoint_dir, at.updates);
  save_run_checkpoint(to, *run.model, *run.opt, run.strategy->optimizer_range(), comm,
                      run.strategy.get(), at, false);
  if (!comm || comm->rank() == 0) prune_commits(cfg.checkpoint_dir, kCommitsKept);
  ++t.commits;
  t.commit_s += timer.seconds();
}

// The epoch line's [loss, correct, images] over all ranks: this rank's `m`
// summed (collective) plus what a resumed run carried in.
std::array<double, 3> epoch_sums(Strategy& strategy, const double* m,
                                 const std::array<double, 3>& carried) {
  std::array<double, 3> v = {m[0], m[1], m[2]};
  strategy.sum(v.data(), 3);
  for (size_t k = 0; k < 3; ++k) v[k] = v[k] / strategy.metric_replicas() + carried[k];
  return v;
}

// One epoch of steps, from global sample `start` of its permutation (a
// resumed commit's position; `carried` its line's sums so far); returns its
// line's start (train loss and accuracy), or null where --stop-after-steps
// stopped it.
nlohmann::ordered_json run_epoch(const TrainConfig& cfg, comm::Communicator* comm, Run& run,
                                 int epoch, Totals& t, Report& report, int64_t start,
                                 const std::array<double, 3>& carried) {
  Strategy& strategy = *run.strategy;
  Prefetcher prefetch(run.data.train, run.sampler->epoch_indices(epoch - 1, start), cfg.batch,
                      false, 2, nullptr, &run.images, epoch - 1);
  Timer epoch_timer;
  double m[3] = {0, 0, 0};  // [loss_sum, correct, images] on this rank, summed over ranks below
  const int64_t samples_per_step = cfg.batch * strategy.data_world();
  Batch batch;
  Timer since_update;  // training time to each update, commits excluded (t.plan)
  for (int64_t i = 1;; ++i) {
    Timer wait;
    {
      timeline::Span span("data", "data wait");
      if (!prefetch.next(batch)) break;
    }
    t.data_s += wait.seconds();
    if (comm && cfg.timeout > 0) comm->check_arrival("step " + std::to_string(t.micro + 1));
    StepResult r;
    {
      timeline::Span span("step", "step", "step", t.micro + 1);
      r = strategy.step(batch, run.schedule->lr(t.updates), t.times);
    }
    if (!std::isfinite(r.loss_sum))
      throw Error(detail::concat("step ", t.micro + 1, " (epoch ", epoch, "): the loss is ",
                                 r.loss_sum, "; training diverged and stopped",
                                 cfg.save.empty() ? "" : ", " + cfg.save + " kept as it was"));
    const bool updated = ++t.micro % cfg.accumulate == 0;
    if (updated) ++t.updates, t.beacon->set(t.updates);
    m[0] += r.loss_sum;
    m[1] += r.correct;
    m[2] += double(r.images);
    if (updated && t.plan.due(t.updates, since_update.seconds())) {
      const double before = t.commit_s;
      // Within the epoch only: its last step's commit is the epoch end's, after evaluation.
      if (i < prefetch.num_batches()) {
        RunPosition at;
        at.epoch = epoch - 1;
        at.updates = t.updates;
        at.loss_scale = scale_state(strategy);
        at.epoch_samples = start + i * samples_per_step;
        at.epoch_sums = epoch_sums(strategy, m, carried);
        timeline::Span span("checkpoint", "commit");
        commit(cfg, comm, run, at, t);
      }
      t.plan.next(t.updates, t.commit_s - before, comm);
    }
    if (updated) since_update.reset();
    if (cfg.stop_after_steps > 0 && t.micro >= cfg.stop_after_steps) return nullptr;
    if (cfg.step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(cfg.step_delay_ms));
    const double el = epoch_timer.seconds();
    report.progress(epoch, i, prefetch.num_batches(), m[0] / m[2],
                    m[2] * strategy.data_world() / el,
                    el / double(i) * double(prefetch.num_batches() - i));
  }
  const double secs = epoch_timer.seconds();
  const std::array<double, 3> all = epoch_sums(strategy, m, carried);
  std::copy(all.begin(), all.end(), m);
  strategy.sync_model();
  const double images = m[2] - carried[2];  // this process's part of the epoch
  t.epoch_seconds.push_back(secs);
  t.epoch_ips.push_back(images / secs);
  t.images += images;
  t.seconds += secs;
  return {{"epoch", epoch},
          {"train_loss", m[0] / m[2]},
          {"train_accuracy", m[1] / m[2]},
          {"images", int64_t(m[2])}};
}

// A weight that is NaN or infinite stops the run before it can be saved.
void check_weights(const TrainConfig& cfg, Run& run, int epoch) {
  const std::string bad = first_non_finite(run.model->params());
  if (!bad.empty())
    throw Error(detail::concat("epoch ", epoch, ": weight ", bad,
                               " is not finite; training diverged and stopped",
                               cfg.save.empty() ? "" : ", " + cfg.save + " kept as it was"));
}

// Token models: losses are nats per token, so also perplexities, and tokens/s.
void add_token_figures(const nn::Model& model, nlohmann::ordered_json& line) {
  if (model.spec().input.kind != nn::InputKind::kTokens) return;
  line["train_perplexity"] = std::exp(line["train_loss"].get<double>());
  if (line.contains("test_loss")) line["test_perplexity"] = std::exp(line["test_loss"].get<double>());
  line["tokens_per_second"] = line["images_per_second"].get<double>() * double(model.input_shape()[0]);
}

// The estimate per rank by part (MiB, as peak_memory_mb), and what it was checked against.
nlohmann::ordered_json memory_summary(const Run& run) {
  nlohmann::ordered_json j = run.memory.to_json();
  j["ranks_on_machine"] = run.ranks_on_machine;
  j["available_mb"] = run.available / (1 << 20);
  return j;
}

// Every rank's peak resident memory, MB, in rank order (collective). Ranks
// differ where strategies hold different things (ZeRO's shards, pipeline stages).
std::vector<double> peak_memory_per_rank(comm::Communicator* comm) {
  if (!comm) return {peak_rss_mb()};
  std::vector<double> mb(size_t(comm->size()), 0.0);
  mb[size_t(comm->rank())] = peak_rss_mb();
  comm::sum_metrics(*comm, mb.data(), comm->size());
  return mb;
}

nlohmann::ordered_json summarize(const TrainConfig& cfg, Run& run, const Totals& t,
                                 comm::Communicator* comm) {
  const int world = comm ? comm->size() : 1;
  const std::vector<double> peak = peak_memory_per_rank(comm);
  const double n = double(std::max<int64_t>(t.micro, 1));
  nlohmann::ordered_json summary = {
      {"model", cfg.model},
      {"parameters", run.model->num_params()},
      {"parallel", cfg.parallel},
      {"world_size", world},
      {"batch", cfg.batch},
      {"global_batch", run.global_batch},
      {"threads", omp_get_max_threads()},
      {"precision", cfg.precision.precision},
      {"bf16_kernels", bf16_kernels(cfg.precision.precision)},
      {"grad_dtype", cfg.precision.grad_dtype},
      {"config", cfg.effective(run.global_batch)},
      {"test_accuracy", t.eval.accuracy},
      {"test_loss", t.eval.loss},
      {"per_class_accuracy", t.eval.per_class_accuracy},
      {"epoch_seconds", t.epoch_seconds},
      {"images_per_second", t.images / t.seconds},
      {"epoch_images_per_second", t.epoch_ips},
      {"peak_memory_mb", peak[0]},  // rank 0's
      {"peak_memory_mb_per_rank", peak},
      {"memory_estimate", memory_summary(run)},
      {"step_seconds",
       {{"total", (t.times.compute + t.times.comm + t.data_s) / n},
        {"compute", t.times.compute / n},
        {"communication", t.times.comm / n},
        {"data", t.data_s / n}}}};
  if (cfg.commit_every != 0)
    summary["commits"] = {{"count", t.commits},
                          {"every", t.plan.every()},
                          {"seconds", t.commit_s},
                          {"mean_seconds", t.commit_s / double(std::max<int64_t>(t.commits, 1))}};
  const nlohmann::ordered_json extra = run.strategy->summary();  // collective: every rank
  for (auto& [key, value] : extra.items()) summary[key] = value;
  return summary;
}


// --resume auto and --commit-every: the commit folder made ready, the commit
// to resume chosen (every rank alike), and a fresh run's leftovers removed.
void prepare_commits(TrainConfig& cfg, comm::Communicator* comm) {
  const bool root = !comm || comm->rank() == 0;
  const bool resume_auto = cfg.resume == "auto";
  if (!resume_auto && cfg.commit_every == 0) return;
  prepare_commit_dir(cfg.checkpoint_dir);
  if (resume_auto) cfg.resume = resolve_resume_auto(cfg.checkpoint_dir, comm);
  // A new run starts the folder's commits afresh, so --resume auto never
  // picks another run's newer one (--resume F continues a run: kept).
  if (!resume_auto && cfg.resume.empty() && root)
    if (const int n = remove_commits(cfg.checkpoint_dir); n > 0)
      std::fprintf(stderr, "cohort: note: --checkpoint-dir %s: removed %d commits of an earlier run\n",
                   cfg.checkpoint_dir.c_str(), n);
}

}  // namespace

nlohmann::ordered_json train(const TrainConfig& given, comm::Communicator* comm) {
  const int rank = comm ? comm->rank() : 0, world = comm ? comm->size() : 1;
  check_config(given, world);
  TrainConfig cfg = with_global_batch(given, world);
  prepare_commits(cfg, comm);
  Report report(cfg.log, rank == 0);
  // 0: this machine's CPUs shared by the ranks on it (2 ranks x 2 threads on 2
  // vCPUs ran mnist-small 15x slower than 2 x 1: each waits on a descheduled twin).
  omp_set_num_threads(cfg.threads > 0 ? cfg.threads : default_threads_per_rank());
  if (comm) comm->set_timeout(cfg.timeout);
  Run run = set_up(cfg, comm);
  report.start({{"model", cfg.model}, {"parameters", run.model->num_params()}, {"data", cfg.data},
                {"train_images", run.sampler->size() * run.strategy->data_world()},
                {"test_images", run.data.test.size()}, {"batch", cfg.batch},
                {"threads", omp_get_max_threads()}, {"world_size", world},
                {"parallel", cfg.parallel}, {"global_batch", run.global_batch},
                {"precision", cfg.precision.precision},
                {"bf16_kernels", bf16_kernels(cfg.precision.precision)}});
  // Recording starts here, after set-up: the file shows training.
  std::unique_ptr<TimelineFile> trace;
  if (!cfg.timeline.empty()) trace = std::make_unique<TimelineFile>(cfg.timeline, comm);
  Totals totals;
  totals.updates = run.start.updates;
  totals.plan = CommitPlan(cfg.commit_every, totals.updates);
  ProgressBeacon beacon(kElasticProgress, rank == 0);
  beacon.set(totals.updates);
  totals.beacon = &beacon;
  for (int epoch = run.start.epoch + 1; epoch <= cfg.epochs; ++epoch) {
    const bool resumed_within = epoch == run.start.epoch + 1;
    nlohmann::ordered_json line =
        run_epoch(cfg, comm, run, epoch, totals, report,
                  resumed_within ? run.start.epoch_samples : 0,
                  resumed_within ? run.start.epoch_sums : std::array<double, 3>{});
    if (line.is_null()) {
      if (trace) trace->write();
      return {{"stopped_after_steps", cfg.stop_after_steps}};
    }
    if (cfg.eval == "epoch" || (cfg.eval == "last" && epoch == cfg.epochs)) {
      timeline::Span span("evaluate", "evaluate");
      totals.eval = evaluate_all(run, cfg.batch);
      line["test_loss"] = totals.eval.loss;
      line["test_accuracy"] = totals.eval.accuracy;
    }
    line["seconds"] = totals.epoch_seconds.back();
    line["images_per_second"] = totals.epoch_ips.back();
    add_token_figures(*run.model, line);
    report.epoch(line);
    // Each rank checks the weights it holds (ZeRO-3: its shard; the rest reads
    // as zeros), so every bad value is found before the save.
    check_weights(cfg, run, epoch);
    RunPosition done;
    done.epoch = epoch;
    done.updates = totals.updates;
    done.loss_scale = scale_state(*run.strategy);
    if (!cfg.save.empty()) {  // collective: each rank's shard of the state, or rank 0 gathers it
      timeline::Span span("checkpoint", "save");
      done.rngs = gather_rngs(comm, *run.strategy);
      save_run_checkpoint(cfg, *run.model, *run.opt, run.strategy->optimizer_range(), comm,
                          run.strategy.get(), done, rank == 0 && epoch == run.start.epoch + 1);
    }
    if (cfg.commit_every != 0) {
      timeline::Span span("checkpoint", "commit");
      commit(cfg, comm, run, done, totals);
    }
  }
  if (trace) trace->write();
  nlohmann::ordered_json summary = summarize(cfg, run, totals, comm);
  report.summary(summary, class_names(cfg.data), cfg.strategy().summary_text(summary));
  return summary;
}

}  // namespace cohort
