// cohort: one binary with subcommands (models, train, bench step). Library
// code throws typed errors; only here do they become one line and an exit
// code: 2 for bad input (file, flag, data, checkpoint), 1 for anything else.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "bench/comm_bench.h"
#include "bench/grid.h"
#include "bench/report.h"
#include "bench/step_bench.h"
#include "bench/strategies.h"
#include "bench/tune.h"
#include "core/cpus.h"
#include "core/error.h"
#if COHORT_WITH_MPI
#include "comm/mpi/mpi_communicator.h"
#endif
#include "nn/models/zoo.h"
#include "train/trainer.h"

namespace {

using namespace cohort;

void add_train(CLI::App& app, TrainConfig& c) {
  app.add_option("--model", c.model, "model name (see `cohort models`)");
  app.add_option("--data", c.data, "fashion-mnist | mnist | cifar10 | synthetic");
  app.add_option("--data-dir", c.data_dir, "folder holding the dataset files");
  app.add_option("--epochs", c.epochs);
  app.add_option("--batch", c.batch, "batch size per process");
  app.add_option("--lr", c.lr, "learning rate");
  app.add_option("--optimizer", c.optimizer, "sgd | adam | adamw");
  app.add_option("--momentum", c.momentum, "SGD momentum");
  app.add_option("--weight-decay", c.weight_decay);
  app.add_option("--lr-schedule", c.schedule, "constant | step | cosine");
  app.add_option("--warmup", c.warmup_steps, "linear warm-up steps");
  app.add_option("--clip", c.clip_norm, "gradient-norm clipping (0: off)");
  app.add_option("--threads", c.threads, "threads per process (0: CPUs / ranks on this machine)");
  app.add_option("--seed", c.seed);
  app.add_option("--repeat", c.repeat, "repeat the training set k times per epoch");
  app.add_option("--limit", c.limit, "use only the first N training images");
  app.add_option("--log", c.log, "human | jsonl");
  app.add_option("--eval", c.eval, "test-set evaluation: after every epoch, or only the last");
  app.add_option("--save", c.save,
                 "after each epoch write a safetensors checkpoint: weights, optimizer state, epoch");
  app.add_option("--load", c.load, "start a new run from a checkpoint's weights (any optimizer)");
  app.add_option("--resume", c.resume,
                 "continue a --save'd run: weights, optimizer state, lr schedule, next epoch "
                 "(--epochs is the whole run's)");
  app.add_option("--parallel", c.parallel,
                 "none | dp (data-parallel over all-reduce) | replicas (one process, threads)");
  app.add_option("--replicas", c.replicas, "replica threads for --parallel replicas");
  app.add_option("--stages", c.stages, "stages (one rank each) for --parallel mp | pp | hybrid");
  app.add_option("--split", c.split, "cut points between stages, layer indices (\"3,7\")");
  app.add_option("--balance", c.balance,
                 "stage cuts without --split: params (equal parameter counts) | time (measured)");
  app.add_option("--micro-batches", c.micro_batches, "micro-batches per batch (pp, hybrid)");
  app.add_option("--schedule", c.pipe_schedule, "pipeline schedule: gpipe | 1f1b");
  app.add_option("--dp", c.dp, "data-parallel replicas of the pipeline (hybrid)");
  app.add_option("--servers", c.servers, "parameter-server ranks, the last S (ps)");
  app.add_option("--ps-mode", c.ps_mode, "sync | async (ps)");
  app.add_option("--staleness", c.staleness,
                 "async ps: steps a worker may run ahead of the slowest (-1: no bound)");
  app.add_option("--workers", c.workers, "start N ranks on this machine with mpirun");
  app.add_option("--allreduce", c.allreduce, "ring | tree | mpi | auto");
  app.add_option("--bucket-mb", c.bucket_mb, "gradient bucket size in MiB");
  app.add_flag("--no-overlap{false}", c.overlap, "reduce after backward, not during it");
  app.add_option("--accumulate", c.accumulate, "micro-batches per optimizer step");
  app.add_option("--timeout", c.timeout, "seconds before a stalled collective is reported");
  app.add_flag("--deterministic", c.deterministic, "fixed reduction order: bit-for-bit runs");
}

// `--workers N` outside mpirun: run this same command under mpirun with N
// ranks on this machine (replaces the process). Returns only on failure.
int launch_workers(int argc, char** argv, int workers, int threads, bool add_parallel = true) {
  std::vector<std::string> args = {"mpirun", "--oversubscribe", "--bind-to", "none", "-np",
                                   std::to_string(workers), "/proc/self/exe"};
  args[6] = std::filesystem::read_symlink("/proc/self/exe").string();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--workers") {
      ++i;
      continue;
    }
    if (a.rfind("--workers=", 0) == 0) continue;
    args.push_back(a);
  }
  bool has_parallel = false;
  for (auto& a : args) has_parallel |= (a == "--parallel" || a.rfind("--parallel=", 0) == 0);
  if (add_parallel && !has_parallel) {
    args.push_back("--parallel");
    args.push_back("dp");
  }
  // More OpenMP threads than CPUs (teams of 2 or more): a thread spinning at a barrier (libgomp's
  // default) holds the CPU its descheduled partner needs. Passive waiting
  // measured 785 -> 3,605 images/s for mnist-small at 2 ranks x 2 threads on
  // 2 vCPUs (and costs a third at 1 x 2, so only when oversubscribed).
  const int cpus = usable_cpus();
  if (threads > 1 && workers * threads > cpus && !std::getenv("OMP_WAIT_POLICY") &&
      !std::getenv("GOMP_SPINCOUNT")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    std::fprintf(stderr, "cohort: %d ranks x %d threads on %d CPUs: OMP_WAIT_POLICY=PASSIVE\n",
                 workers, threads, cpus);
  }
  // mpirun refuses root without these; the user asked for ranks by --workers.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  execvp("mpirun", cargs.data());
  std::fprintf(stderr, "cohort: --workers: cannot run mpirun (%s); install openmpi-bin\n",
               std::strerror(errno));
  return 2;
}

int list_models() {
  std::printf("%-12s %12s  %s\n", "model", "parameters", "description");
  for (auto& e : nn::model_names()) {
    auto m = nn::make_model(e.name);
    std::printf("%-12s %12lld  %s\n", e.name.c_str(), (long long)m->num_params(),
                e.description.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cohort: distributed deep-learning training, measured"};
  app.require_subcommand(1);
  auto* models = app.add_subcommand("models", "list the model zoo with parameter counts");
  TrainConfig train_cfg;
  auto* train = app.add_subcommand("train", "train a model");
  add_train(*train, train_cfg);
  auto* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  StepBenchConfig step_cfg;
  auto* step = bench->add_subcommand("step", "time training steps on synthetic input");
  step->add_option("--model", step_cfg.model);
  step->add_option("--batch", step_cfg.batch);
  step->add_option("--threads", step_cfg.threads);
  step->add_option("--steps", step_cfg.steps);
  step->add_option("--warmup", step_cfg.warmup);
  step->add_option("--peer", step_cfg.peer, "pytorch: run the PyTorch peer in the same run");
  step->add_flag("--peak", step_cfg.peak, "also measure the fp32 matmul peak and the share of it");
  step->add_option("--workers", step_cfg.workers, "data-parallel ranks (mpirun on this machine)");
  step->add_flag("--no-overlap{false}", step_cfg.overlap, "reduce after backward");

  GridFlags grid_flags;
  auto* grid = bench->add_subcommand("grid", "run an experiment grid: cohort (and PyTorch) per point");
  grid->add_option("--grid", grid_flags.grid, "named grid (bench/grids/NAME.json) or a JSON file");
  grid->add_option("--workers", grid_flags.workers, "ranks per point, comma list (1,2,4)");
  grid->add_option("--batch", grid_flags.batch, "batch per rank, comma list");
  grid->add_option("--repeat", grid_flags.repeat, "training-set repeats, comma list");
  grid->add_option("--model", grid_flags.model, "models, comma list");
  grid->add_option("--threads-per-rank", grid_flags.threads_per_rank,
                   "threads per rank, comma list (0: cores / ranks)");
  grid->add_option("--epochs", grid_flags.epochs);
  grid->add_option("--limit", grid_flags.limit, "first N training images");
  grid->add_option("--data", grid_flags.data, "fashion-mnist | synthetic");
  grid->add_option("--peer", grid_flags.peer, "pytorch | none");
  grid->add_option("--name", grid_flags.name, "results folder name");
  grid->add_option("--out", grid_flags.out, "parent folder of results (default results)");
  std::string report_dir;
  auto* grid_report = bench->add_subcommand("report", "redraw report.md and plots from DIR/results.jsonl");
  grid_report->add_option("dir", report_dir, "a grid's results folder")->required();

  TuneConfig tune_cfg;
  auto* tune = bench->add_subcommand("tune", "find the fastest processes x threads x batch for a model");
  add_tune_options(*tune, tune_cfg);
  StrategiesConfig strategies_cfg;
  auto* strategies =
      bench->add_subcommand("strategies", "every --parallel strategy at one global batch, one table");
  add_strategies_options(*strategies, strategies_cfg);

#if COHORT_WITH_MPI
  CommBenchConfig comm_cfg;
  int comm_workers = 2;
  auto* comm_bench = bench->add_subcommand("comm", "all-reduce bus bandwidth: ring, tree, MPI, gloo");
  comm_bench->add_option("--workers", comm_workers, "ranks (mpirun on this machine)");
  comm_bench->add_option("--min-bytes", comm_cfg.min_bytes);
  comm_bench->add_option("--max-bytes", comm_cfg.max_bytes);
  comm_bench->add_option("--seconds", comm_cfg.seconds, "timing budget per size and algorithm");
  comm_bench->add_option("--peer", comm_cfg.peer, "pytorch (gloo) or none");
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "cohort: %s\n", e.what());
    return 2;
  }
  try {
    if (*models) return list_models();
    if (*train) {
      COHORT_INPUT_CHECK(train_cfg.workers >= 1, "--workers must be at least 1, got ",
                         train_cfg.workers);
      // Strategies with a fixed shape (stages, dp x stages) start their own
      // ranks when --workers is not given; the rest need --workers N.
      const int ranks = train_cfg.workers > 1 ? train_cfg.workers : train_cfg.ranks_needed();
#if COHORT_WITH_MPI
      if (!comm::launched_by_mpirun() && ranks > 1) {
        // Refuse bad flags once, here, before any rank starts.
        check_config(train_cfg, ranks);
        return launch_workers(argc, argv, ranks, train_cfg.threads, true);
      }
      if (train_cfg.parallel != "none" && train_cfg.parallel != "replicas" ||
          comm::launched_by_mpirun()) {
        if (train_cfg.parallel == "none") train_cfg.parallel = "dp";
        auto world = comm::mpi_world(&argc, &argv);
        cohort::train(train_cfg, world.get());  // checks the flags first
        return 0;
      }
#endif
      cohort::train(train_cfg);
      return 0;
    }
    if (*tune) return run_tune(tune_cfg);
    if (*strategies) return run_strategies(strategies_cfg);
    if (*grid) return run_grid(resolve_grid(grid_flags)) == 0 ? 0 : 1;
    if (*grid_report) {
      rebuild_report(report_dir);
      return 0;
    }
    if (*step) {
      COHORT_INPUT_CHECK(step_cfg.workers >= 1, "--workers must be at least 1, got ",
                         step_cfg.workers);
#if COHORT_WITH_MPI
      if (step_cfg.workers > 1 && !comm::launched_by_mpirun())
        return launch_workers(argc, argv, step_cfg.workers, step_cfg.threads, false);
      if (comm::launched_by_mpirun()) {
        auto world = comm::mpi_world(&argc, &argv);
        run_step_bench(step_cfg, world.get());
        return 0;
      }
#endif
      run_step_bench(step_cfg);
      return 0;
    }
#if COHORT_WITH_MPI
    if (*comm_bench) {
      if (comm_cfg.peer == "none") comm_cfg.peer.clear();
      COHORT_INPUT_CHECK(comm_workers >= 2, "--workers must be at least 2, got ", comm_workers);
      if (!comm::launched_by_mpirun()) return launch_workers(argc, argv, comm_workers, 0, false);
      auto world = comm::mpi_world(&argc, &argv);
      run_comm_bench(*world, comm_cfg);
      return 0;
    }
#endif
  } catch (const InputError& e) {
    std::fprintf(stderr, "cohort: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cohort: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
