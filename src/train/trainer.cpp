#include "train/trainer.h"

#include <omp.h>
#include <sys/resource.h>

#include <algorithm>

#include "core/clock.h"
#include "core/cpus.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/prefetch.h"
#include "data/sampler.h"
#include "nn/models/zoo.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/evaluate.h"
#include "train/report.h"
#include "train/resume.h"
#include "parallel/data_parallel.h"
#include "parallel/local.h"
#include "parallel/model_parallel.h"
#include "parallel/parameter_server.h"
#include "parallel/pipeline.h"
#include "parallel/stages.h"
#include "parallel/replicas.h"

namespace cohort {

std::vector<std::string> class_names(const std::string& dataset) {
  if (dataset == "fashion-mnist")
    return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
            "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  if (dataset == "cifar10")
    return {"airplane", "automobile", "bird", "cat", "deer",
            "dog",      "frog",       "horse", "ship", "truck"};
  return {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
}

// This process's peak resident memory (every rank is alike under dp).
static double peak_memory_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;
}

void check_config(const TrainConfig& c, int world) {
  COHORT_INPUT_CHECK(c.epochs >= 1, "--epochs must be at least 1, got ", c.epochs);
  COHORT_INPUT_CHECK(c.batch >= 1, "--batch must be at least 1, got ", c.batch);
  COHORT_INPUT_CHECK(c.lr > 0, "--lr must be positive, got ", c.lr);
  COHORT_INPUT_CHECK(c.threads >= 0, "--threads must be 0 (all) or more, got ", c.threads);
  COHORT_INPUT_CHECK(c.repeat >= 1, "--repeat must be at least 1, got ", c.repeat);
  COHORT_INPUT_CHECK(c.load.empty() || c.resume.empty(),
                     "--load and --resume exclude each other (--resume restores the weights too)");
  const std::string& p = c.parallel;
  COHORT_INPUT_CHECK(p == "none" || p == "dp" || p == "replicas" || p == "mp" || p == "pp" ||
                         p == "hybrid" || p == "ps",
                     "--parallel: unknown strategy '", p,
                     "' (valid: none, dp, replicas, mp, pp, hybrid, ps)");
  COHORT_INPUT_CHECK(c.replicas >= 1, "--replicas must be at least 1, got ", c.replicas);
  COHORT_INPUT_CHECK(c.accumulate >= 1, "--accumulate must be at least 1, got ", c.accumulate);
  COHORT_INPUT_CHECK(c.timeout >= 0, "--timeout must be 0 (off) or more, got ", c.timeout);
  COHORT_INPUT_CHECK(c.eval == "epoch" || c.eval == "last", "--eval: unknown choice '", c.eval,
                     "' (valid: epoch, last)");
  const bool staged = p == "mp" || p == "pp" || p == "hybrid";
  if (staged || p == "ps") {
    COHORT_INPUT_CHECK(c.clip_norm <= 0, "--clip is not supported with --parallel ", p,
                       " (the gradient norm spans ranks)");
    COHORT_INPUT_CHECK(c.accumulate == 1, "--accumulate is not supported with --parallel ", p,
                       (p == "pp" || p == "hybrid") ? " (use --micro-batches)" : "");
  }
  if (staged) {
    COHORT_INPUT_CHECK(c.balance == "params" || c.balance == "time", "--balance: unknown choice '",
                       c.balance, "' (valid: params, time)");
    COHORT_INPUT_CHECK(c.dp >= 1, "--dp must be at least 1, got ", c.dp);
    COHORT_INPUT_CHECK(p == "hybrid" || c.dp == 1, "--dp ", c.dp,
                       " is for --parallel hybrid (got --parallel ", p, ")");
    auto model = nn::make_model(c.model, 0);
    cut_stages(*model, c.stages, c.split);  // empty stages, more stages than layers
    COHORT_INPUT_CHECK(world == c.ranks_needed(), p == "hybrid" ? "--dp " : "",
                       p == "hybrid" ? std::to_string(c.dp) + " x " : "", "--stages ", c.stages,
                       " needs ", c.ranks_needed(), " ranks, got ", world);
  }
  if (p == "pp" || p == "hybrid") {
    COHORT_INPUT_CHECK(c.micro_batches >= 1, "--micro-batches must be at least 1, got ",
                       c.micro_batches);
    COHORT_INPUT_CHECK(c.batch % c.micro_batches == 0, "--micro-batches ", c.micro_batches,
                       " does not divide --batch ", c.batch);
    COHORT_INPUT_CHECK(c.pipe_schedule == "gpipe" || c.pipe_schedule == "1f1b",
                       "--schedule: unknown pipeline schedule '", c.pipe_schedule,
                       "' (valid: gpipe, 1f1b)");
  }
  if (p == "ps") {
    COHORT_INPUT_CHECK(c.servers >= 1, "--servers must be at least 1, got ", c.servers);
    COHORT_INPUT_CHECK(c.servers < world, "--servers ", c.servers, " leaves no worker: ", world,
                       " ranks in all (workers are the ranks that are not servers)");
    COHORT_INPUT_CHECK(c.ps_mode == "sync" || c.ps_mode == "async", "--ps-mode: unknown mode '",
                       c.ps_mode, "' (valid: sync, async)");
    COHORT_INPUT_CHECK(c.staleness >= -1, "--staleness must be -1 (no bound) or more, got ",
                       c.staleness);
  }
}

// The images [begin, end) of a dataset, sharing its memory.
static Dataset shard(const Dataset& d, int rank, int world) {
  const int64_t b = d.size() * rank / world, e = d.size() * (rank + 1) / world;
  Dataset s;
  s.images = d.images.slice(b, e);
  s.labels.assign(d.labels.begin() + b, d.labels.begin() + e);
  s.num_classes = d.num_classes;
  s.name = d.name;
  return s;
}

// Evaluates this rank's shard of the test set and sums over ranks.
static EvalResult evaluate_all(nn::Model& model, const Dataset& test, Strategy& strategy,
                               int64_t batch) {
  // No larger than the training batch: every rank runs the whole model here,
  // and a big model's activations at 256 (ResNet-50 at 32x32: several GB per
  // rank) must fit beside the other ranks on one machine.
  EvalResult mine =
      evaluate(model, shard(test, strategy.rank(), strategy.world()), std::min<int64_t>(256, batch));
  const int k = test.num_classes;
  // [loss_sum, images, right per class..., seen per class...]
  std::vector<double> v(size_t(2 + 2 * k), 0.0);
  v[0] = mine.loss * double(mine.images);
  v[1] = double(mine.images);
  for (int c = 0; c < k; ++c) {
    v[size_t(2 + k + c)] = double(mine.seen[size_t(c)]);
    v[size_t(2 + c)] = mine.per_class_accuracy[size_t(c)] * double(mine.seen[size_t(c)]);
  }
  strategy.sum(v.data(), int(v.size()));
  EvalResult r;
  r.images = int64_t(v[1]);
  r.loss = v[1] > 0 ? v[0] / v[1] : 0;
  double right = 0;
  for (int c = 0; c < k; ++c) {
    const double seen = v[size_t(2 + k + c)], ok = v[size_t(2 + c)];
    right += ok;
    r.seen.push_back(int64_t(seen));
    r.per_class_accuracy.push_back(seen > 0 ? ok / seen : 0);
  }
  r.accuracy = v[1] > 0 ? right / v[1] : 0;
  return r;
}

static DataSplit load_data(const TrainConfig& cfg, const nn::Model& model) {
  const Shape& in = model.input_shape();
  if (cfg.data == "synthetic") {
    // Synthetic data takes the model's input shape (28x28x1 or 32x32x3).
    const int64_t n = cfg.limit > 0 ? cfg.limit : 60000;
    return {make_synthetic(n, int(in[0]), int(in[1]), int(in[2]), 10, 1234),
            make_synthetic(2000, int(in[0]), int(in[1]), int(in[2]), 10, 5678)};
  }
  DataSplit data = load_dataset(cfg.data, cfg.data_dir, cfg.limit);
  const Shape img(data.train.images.shape().begin() + 1, data.train.images.shape().end());
  COHORT_INPUT_CHECK(img == in, "--model ", cfg.model, " takes ", shape_str(in),
                     " images (HWC) but --data ", cfg.data, " has ", shape_str(img));
  return data;
}

// The stage cuts for mp, pp and hybrid. --balance time: rank 0 times every
// layer on one micro-batch and all ranks cut by its figures.
static std::vector<size_t> plan_stages(const TrainConfig& cfg, comm::Communicator& comm,
                                       nn::Model& model) {
  if (cfg.balance != "time" || !cfg.split.empty()) return cut_stages(model, cfg.stages, cfg.split);
  std::vector<double> w(model.layers().size(), 0.0);
  const bool piped = cfg.parallel == "pp" || cfg.parallel == "hybrid";
  if (comm.rank() == 0) w = time_layers(model, piped ? cfg.batch / cfg.micro_batches : cfg.batch);
  comm.broadcast(w.data(), w.size() * sizeof(double), 0);
  return cut_stages(model, cfg.stages, "", &w);
}

static std::unique_ptr<Strategy> make_strategy(const TrainConfig& cfg, comm::Communicator* comm,
                                               nn::Model& model, Optimizer& opt) {
  if (cfg.parallel == "none") return std::make_unique<LocalStep>(model, opt, cfg.seed, cfg.clip_norm);
  if (cfg.parallel == "replicas")
    return std::make_unique<Replicas>(model, opt, cfg.replicas,
                                      std::max(1, omp_get_max_threads() / cfg.replicas), cfg.seed,
                                      cfg.clip_norm);
  COHORT_INPUT_CHECK(comm, "--parallel ", cfg.parallel,
                     " needs ranks: start with mpirun or --workers N");
  if (cfg.parallel == "mp")
    return std::make_unique<ModelParallel>(*comm, model, opt, plan_stages(cfg, *comm, model));
  if (cfg.parallel == "ps") {
    PsConfig pc;
    pc.servers = cfg.servers;
    pc.async = cfg.ps_mode == "async";
    pc.staleness = cfg.staleness;
    return std::make_unique<ParameterServer>(*comm, model, opt, pc, cfg.seed);
  }
  if (cfg.parallel == "pp" || cfg.parallel == "hybrid") {
    PipelineConfig pc;
    pc.micro_batches = cfg.micro_batches;
    pc.one_f_one_b = cfg.pipe_schedule == "1f1b";
    pc.dp = cfg.parallel == "hybrid" ? cfg.dp : 1;
    return std::make_unique<Pipeline>(*comm, model, opt, plan_stages(cfg, *comm, model), pc,
                                      cfg.seed);
  }
  DataParallelConfig dp;
  dp.bucket_mb = cfg.bucket_mb;
  dp.overlap = cfg.overlap;
  dp.accumulate = cfg.accumulate;
  dp.algorithm = cfg.deterministic ? comm::Algorithm::kRing : comm::parse_algorithm(cfg.allreduce);
  return std::make_unique<DataParallel>(*comm, model, opt, dp, cfg.seed, cfg.clip_norm);
}

nlohmann::ordered_json train(const TrainConfig& cfg, comm::Communicator* comm) {
  check_config(cfg, comm ? comm->size() : 1);
  const int rank = comm ? comm->rank() : 0, world = comm ? comm->size() : 1;
  Report report(cfg.log, rank == 0);
  // 0: this machine's CPUs shared by the ranks on it (2 ranks x 2 threads on 2
  // vCPUs ran mnist-small 15x slower than 2 x 1: each waits on a descheduled twin).
  omp_set_num_threads(cfg.threads > 0 ? cfg.threads : default_threads_per_rank());
  if (comm) comm->set_timeout(cfg.timeout);
  auto model = nn::make_model(cfg.model, cfg.seed);
  DataSplit data = load_data(cfg, *model);
  if (comm) check_and_broadcast(*comm, *model, cfg.describe());

  auto opt = make_optimizer(cfg.optimizer, cfg.weight_decay, cfg.momentum);
  auto strategy = make_strategy(cfg, comm, *model, *opt);
  // --load, --resume: every rank reads the file, and its range of the optimizer state.
  const RunPosition start =
      restore_checkpoint(cfg, *model, *opt, strategy->optimizer_range(), rank == 0);
  Sampler sampler(data.train.size(), strategy->data_rank(), strategy->data_world(), cfg.repeat,
                  cfg.seed, true);
  const int64_t micro_per_epoch = sampler.size() / cfg.batch + (sampler.size() % cfg.batch != 0);
  const int64_t steps_per_epoch = std::max<int64_t>(1, micro_per_epoch / cfg.accumulate);
  ScheduleOptions so;
  so.lr = cfg.lr;
  so.warmup_steps = cfg.warmup_steps;
  so.total_steps = steps_per_epoch * cfg.epochs;
  so.step_size = steps_per_epoch;
  auto schedule = make_schedule(cfg.schedule, so);
  const int64_t global_batch = cfg.batch * strategy->data_world() * cfg.accumulate;

  report.start({{"model", cfg.model}, {"parameters", model->num_params()}, {"data", cfg.data},
                {"train_images", sampler.size() * strategy->data_world()}, {"test_images", data.test.size()},
                {"batch", cfg.batch}, {"threads", omp_get_max_threads()}, {"world_size", world},
                {"parallel", cfg.parallel}, {"global_batch", global_batch}});

  std::vector<double> epoch_seconds, epoch_ips;
  double total_images = 0, total_seconds = 0, data_s = 0;
  StepTimes times;
  int64_t updates = start.updates, total_micro = 0;
  EvalResult eval;
  for (int epoch = start.epoch + 1; epoch <= cfg.epochs; ++epoch) {
    Prefetcher prefetch(data.train, sampler.epoch_indices(epoch - 1), cfg.batch, false);
    Timer epoch_timer;
    // [loss_sum, correct, images] on this rank, summed over ranks at the end.
    double m[3] = {0, 0, 0};
    int64_t i = 0;
    Batch batch;
    while (true) {
      Timer t;
      if (!prefetch.next(batch)) break;
      data_s += t.seconds();
      if (comm && cfg.timeout > 0) comm->check_arrival("step " + std::to_string(total_micro + 1));
      StepResult r = strategy->step(batch, schedule->lr(updates), times);
      if (++total_micro % cfg.accumulate == 0) ++updates;
      m[0] += r.loss_sum;
      m[1] += double(r.correct);
      m[2] += double(r.images);
      ++i;
      const double el = epoch_timer.seconds();
      report.progress(epoch, i, prefetch.num_batches(), m[0] / m[2],
                      m[2] * strategy->data_world() / el,
                      el / double(i) * double(prefetch.num_batches() - i));
    }
    const double secs = epoch_timer.seconds();
    strategy->sum(m, 3);
    for (double& v : m) v /= strategy->metric_replicas();
    strategy->sync_model();
    epoch_seconds.push_back(secs);
    epoch_ips.push_back(m[2] / secs);
    total_images += m[2];
    total_seconds += secs;
    nlohmann::ordered_json line = {{"epoch", epoch}, {"train_loss", m[0] / m[2]},
                                   {"train_accuracy", m[1] / m[2]}};
    if (cfg.eval == "epoch" || epoch == cfg.epochs) {
      eval = evaluate_all(*model, data.test, *strategy, cfg.batch);
      line["test_loss"] = eval.loss;
      line["test_accuracy"] = eval.accuracy;
    }
    line["seconds"] = secs;
    line["images_per_second"] = m[2] / secs;
    report.epoch(line);
    if (!cfg.save.empty())  // collective: rank 0 gathers the optimizer state and writes
      save_run_checkpoint(cfg, *model, *opt, strategy->optimizer_range(), comm, {epoch, updates},
                          rank == 0 && epoch == start.epoch + 1);
  }
  const double n = double(std::max<int64_t>(total_micro, 1));
  nlohmann::ordered_json summary = {
      {"model", cfg.model},
      {"parameters", model->num_params()},
      {"parallel", cfg.parallel},
      {"world_size", world},
      {"batch", cfg.batch},
      {"global_batch", global_batch},
      {"threads", omp_get_max_threads()},
      {"test_accuracy", eval.accuracy},
      {"test_loss", eval.loss},
      {"per_class_accuracy", eval.per_class_accuracy},
      {"epoch_seconds", epoch_seconds},
      {"images_per_second", total_images / total_seconds},
      {"epoch_images_per_second", epoch_ips},
      {"peak_memory_mb", peak_memory_mb()},
      {"step_seconds",
       {{"total", (times.compute + times.comm + data_s) / n}, {"compute", times.compute / n},
        {"communication", times.comm / n}, {"data", data_s / n}}}};
  const nlohmann::ordered_json extra = strategy->summary();  // collective: every rank
  for (auto& [key, value] : extra.items()) summary[key] = value;
  report.summary(summary, class_names(cfg.data));
  return summary;
}

}  // namespace cohort
