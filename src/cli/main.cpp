// cohort: one binary with subcommands (models, train, simulate, bench step | grid |
// report | tune | strategies | comm). Library
// code throws typed errors; only here do they become one line and an exit
// code: 2 for bad input (file, flag, data, checkpoint), 1 for anything else.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "bench/comm_bench.h"
#include "bench/grid.h"
#include "bench/report.h"
#include "bench/sim_config.h"
#include "bench/simulate.h"
#include "bench/step_bench.h"
#include "bench/strategies.h"
#include "bench/tune.h"
#include "core/cpus.h"
#include "core/error.h"
#if COHORT_WITH_MPI
#include "comm/mpi/mpi_communicator.h"
#endif
#include "nn/models/zoo.h"
#include "parallel/elastic.h"
#include "parallel/launch.h"
#include "train/checkpoint.h"
#include "train/commits.h"
#include "train/ds_config.h"
#include "train/generate.h"
#include "train/trainer.h"

namespace {

using namespace cohort;

void add_train(CLI::App& app, TrainConfig& c) {
  app.add_option("--model", c.model, "model name (see `cohort models`)");
  app.add_option("--seq", c.seq, "token models: context length (default: the model's)");
  app.add_option("--vocab", c.vocab, "token models: vocabulary size (256: bytes)");
  app.add_option("--data", c.data,
                 "fashion-mnist | mnist | cifar10 | synthetic (images); "
                 "text | tokens (token models)");
  app.add_option("--data-dir", c.data_dir, "folder holding the dataset files");
  app.add_option("--data-path", c.data_path,
                 "file, or glob for --data tokens (llm.c shards); --data text without it: "
                 "the fortunes corpus");
  app.add_option("--epochs", c.epochs);
  app.add_option("--freeze", c.freeze,
                 "fine-tuning: none | backbone (all but the classifier head) | a layer's name "
                 "(it and everything before it): no gradients, no optimizer state, no traffic");
  app.add_option("--resize", c.resize, "scale images to SxS (bilinear) in the data pipeline");
  app.add_flag("--augment", c.augment,
               "random crop with black padding (4 pixels for CIFAR-10, 2 for the MNIST "
               "family) and, for CIFAR-10, a horizontal flip; seeded by (seed, epoch, image)");
  app.add_option("--batch", c.batch, "batch size per process");
  app.add_option("--lr", c.lr, "learning rate");
  app.add_option("--optimizer", c.optimizer, "sgd | adam | adamw");
  app.add_option("--momentum", c.momentum, "SGD momentum");
  app.add_option("--weight-decay", c.weight_decay);
  app.add_option("--adam-beta1", c.beta1, "adam, adamw: first-moment decay");
  app.add_option("--adam-beta2", c.beta2, "adam, adamw: second-moment decay");
  app.add_option("--adam-eps", c.eps, "adam, adamw: the denominator's epsilon");
  app.add_option("--lr-schedule", c.schedule, "constant | step | cosine | linear (decay)");
  app.add_option("--warmup", c.warmup_steps, "linear warm-up steps");
  app.add_option("--total-steps", c.total_steps, "cosine, linear: steps to the floor (0: the whole run)");
  app.add_option("--min-lr", c.min_lr, "cosine, linear: the floor");
  app.add_option("--clip", c.clip_norm, "gradient-norm clipping (0: off)");
  app.add_option("--threads", c.threads, "threads per process (0: CPUs / ranks on this machine)");
  app.add_option("--seed", c.seed)->check(CLI::NonNegativeNumber);
  app.add_option("--repeat", c.repeat, "repeat the training set k times per epoch");
  app.add_option("--limit", c.limit, "use only the first N training images (or token windows)");
  app.add_option("--test-limit", c.test_limit,
                 "evaluate on only the first N test images (or token windows)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--log", c.log, "human | jsonl");
  app.add_option("--eval", c.eval, "test-set evaluation: after every epoch, only the last, or none (the summary's test "
                 "figures are then 0)");
  app.add_option("--save", c.save,
                 "after each epoch write a safetensors checkpoint: weights, optimizer state, epoch");
  app.add_option("--load", c.load,
                 "start a new run from a checkpoint's weights (any optimizer), or from a "
                 "torchvision state dict saved as safetensors: tensors whose name and shape "
                 "match load, a classifier head of another shape is re-initialized");
  app.add_option("--num-classes", c.num_classes,
                 "classifiers: a head of K outputs (0: the model's own)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--load-partial", c.load_partial,
               "--load: let tensors other than the head differ in shape, be missing (they keep "
               "their initialization) or be extra in the file (ignored)");
  app.add_option("--resume", c.resume,
                 "continue a --save'd run: weights, optimizer state, lr schedule, next epoch "
                 "(--epochs is the whole run's); auto: the newest commit in --checkpoint-dir, "
                 "or a fresh run where there is none");
  app.add_option("--commit-every", c.commit_every,
                 "commit the run's whole state every K optimizer updates and at every epoch end, "
                 "for --resume auto (0: off; auto: about every 10 s of training, at most 1% of "
                 "it: the default under --elastic)")
      ->transform(CLI::Transformer(std::map<std::string, std::string>{
          {"auto", std::to_string(kCommitAuto)}}));
  app.add_option("--checkpoint-dir", c.checkpoint_dir,
                 "where commits go (the newest 2 are kept)");
  app.add_option("--global-batch", c.global_batch,
                 "hold the global batch at G at any number of ranks: --batch becomes G / ranks "
                 "(/ --accumulate), which must divide");
  app.add_option("--timeline", c.timeline,
                 "write every rank's steps (data wait, forward and backward per layer, each "
                 "bucket's all-reduce, optimizer, sends, pushes) as Chrome trace-event JSON for "
                 "Perfetto or chrome://tracing");
  app.add_option("--stop-after-steps", c.stop_after_steps)
      ->group("");  // testing: stop cleanly after N steps, as if killed after a commit
  app.add_option("--step-delay-ms", c.step_delay_ms)
      ->group("")  // testing: slow steps, so an elastic test acts within a short run
      ->check(CLI::Range(0, 10000));
  app.add_option("--parallel", c.parallel, "strategy: " + c.strategies->names() + c.strategies->help());
  c.strategies->add_flags(app);
  app.add_option("--workers", c.workers, "start N ranks on this machine with mpirun");
  app.add_option("--accumulate", c.accumulate, "micro-batches per optimizer step");
  app.add_option("--timeout", c.timeout, "seconds before a stalled collective is reported");
  app.add_option("--memory-check", c.memory_check,
                 "on | off: refuse a run whose ranks would not fit in this machine's memory "
                 "(off: only report the estimate)");
  c.precision.add_to(app);
  app.add_option("--config", c.config,
                 "a DeepSpeed ds_config.json: batch, optimizer, scheduler, clipping, bf16/fp16, "
                 "zero_optimization (flags given win over it)");
}

// Ranks the batch keys of --config are checked against: --workers, or this
// mpirun job's size (a --workers rank sees no --workers flag).
int config_world(const TrainConfig& c) {
  if (c.workers > 1) return c.workers;
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  return size ? std::max(1, std::atoi(size)) : 1;
}

// --config: the file fills what the command line did not set.
void apply_config_file(CLI::App& train, TrainConfig& c) {
  if (c.config.empty()) return;
  std::set<std::string> given;
  for (const CLI::Option* o : train.get_options())
    if (o->count() > 0) given.insert(o->get_name());
  apply_ds_config(c.config, c, given, config_world(c));
}

// A rank other than 0 of a --workers job: its input errors are rank 0's too.
bool quiet_rank() {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  return std::getenv(kLaunchedByWorkers) && rank && std::string(rank) != "0";
}

// `--workers N` outside mpirun: run this same command under mpirun with N
// ranks on this machine (replaces the process). Returns only on failure.
int launch_workers(int argc, char** argv, int workers, int threads) {
  std::vector<std::string> args(argv + 1, argv + argc);
  args = mpirun_command(without_flags(args, {"--workers"}), workers);
  prepare_mpirun_environment(workers, threads);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  execvp("mpirun", cargs.data());
  std::fprintf(stderr, "cohort: --workers: cannot run mpirun (%s); install openmpi-bin\n",
               std::strerror(errno));
  return 2;
}

int list_models() {
  std::printf("%-16s %12s  %s\n", "model", "parameters", "description");
  for (auto& spec : nn::model_zoo()) {
    std::printf("%-16s %12lld  %s\n", spec->name.c_str(), (long long)nn::count_params(*spec),
                spec->description.c_str());
  }
  return 0;
}

// Every subcommand and its flags.
struct Commands {
  CLI::App* models;
  CLI::App* train;
  CLI::App* step;
  CLI::App* grid;
  CLI::App* report;
  CLI::App* tune;
  CLI::App* strategies;
  CLI::App* comm = nullptr;
  TrainConfig train_cfg;
  StepBenchConfig step_cfg;
  GridFlags grid_flags;
  std::string report_dir;
  TuneConfig tune_cfg;
  StrategiesConfig strategies_cfg;
  CommBenchConfig comm_cfg;
  int comm_workers = 2;
  CLI::App* generate = nullptr;
  GenerateConfig generate_cfg;
  CLI::App* simulate = nullptr;
  SimulateConfig simulate_cfg;
  ElasticConfig elastic_cfg;
};

void add_elastic(CLI::App& app, ElasticConfig& e) {
  app.add_flag("--elastic", e.enabled, "run a supervisor that restarts the ranks, fewer, when one dies or "
               "stalls (needs --min-workers, --max-workers)");
  app.add_option("--min-workers", e.min_workers, "--elastic: fewest ranks to go on with");
  app.add_option("--max-workers", e.max_workers, "--elastic: most ranks to run");
  app.add_option("--hostfile", e.hostfile, "--elastic: hosts and slots, `host slots=K` lines");
  app.add_option("--host-discovery-script", e.discovery_script,
                 "--elastic: prints `host:slots` lines; re-run every few seconds");
  app.add_option("--max-restarts", e.max_restarts,
                 "--elastic: restarts after a lost rank before giving up (default 3)");
  app.add_option("--cooldown", e.cooldown_s,
                 "--elastic: seconds a failed rank's slot (a host's, after 2 failures) sits out "
                 "(default 30)");
}

void add_generate(CLI::App& g, GenerateConfig& c) {
  g.add_option("--model", c.model, "a token model (see `cohort models`)");
  g.add_option("--seq", c.seq, "context, as the weights were trained (default: the model's)");
  g.add_option("--vocab", c.vocab, "vocabulary, as the weights were trained");
  g.add_option("--load", c.load, "weights to sample from (cohort train --save)")->required();
  g.add_option("--prompt", c.prompt, "text (vocabulary 256: bytes) or token ids 15496,11,995");
  g.add_option("--tokens", c.tokens, "tokens to sample after the prompt");
  g.add_option("--top-k", c.top_k, "sample from the k likeliest (1: greedy)");
  g.add_option("--temperature", c.temperature, "softmax temperature of the draw");
  g.add_option("--seed", c.seed)->check(CLI::NonNegativeNumber);
  g.add_option("--threads", c.threads, "threads (0: all)");
}

void add_step(CLI::App& step, StepBenchConfig& c) {
  step.add_option("--model", c.model);
  step.add_option("--seq", c.seq, "token models: context length (default: the model's)");
  step.add_option("--vocab", c.vocab, "token models: vocabulary size");
  step.add_option("--batch", c.batch);
  step.add_option("--freeze", c.freeze, "fine-tuning: none | backbone | a layer's name");
  step.add_option("--resize", c.resize, "image models: SxS input (0: the model's)");
  step.add_option("--threads", c.threads);
  step.add_option("--steps", c.steps);
  step.add_option("--warmup", c.warmup);
  step.add_option("--peer", c.peer, "pytorch: run the PyTorch peer in the same run");
  step.add_flag("--peak", c.peak,
                "also measure the matmul peak of the run's precision (bf16 for --precision "
                "bf16, fp32 otherwise) and the share of it");
  step.add_option("--timeline", c.timeline,
                  "write the timed steps of every rank as Chrome trace-event JSON (Perfetto)");
  step.add_option("--workers", c.workers, "data-parallel ranks (mpirun on this machine)");
  step.add_option("--parallel", c.parallel, "strategy (none: one process; dp under ranks): " +
                                                 c.strategies->names());
  c.precision.add_to(step);
  c.strategies->add_flags(step);
}

void add_grid(CLI::App& grid, GridFlags& g) {
  grid.add_option("--grid", g.grid, "named grid (bench/grids/NAME.json) or a JSON file");
  grid.add_option("--workers", g.workers, "ranks per point, comma list (1,2,4)");
  grid.add_option("--batch", g.batch, "batch per rank, comma list");
  grid.add_option("--repeat", g.repeat, "training-set repeats, comma list");
  grid.add_option("--model", g.model, "models, comma list");
  grid.add_option("--threads-per-rank", g.threads_per_rank,
                  "threads per rank, comma list (0: cores / ranks)");
  grid.add_option("--epochs", g.epochs);
  grid.add_option("--limit", g.limit, "first N training images");
  grid.add_option("--data", g.data, "fashion-mnist | synthetic");
  grid.add_option("--peer", g.peer, "pytorch | none");
  grid.add_option("--name", g.name, "results folder name");
  grid.add_option("--out", g.out, "parent folder of results (default results)");
}

void add_comm(CLI::App& comm, Commands& c) {
  comm.add_option("--workers", c.comm_workers, "ranks (mpirun on this machine)");
  comm.add_option("--min-bytes", c.comm_cfg.min_bytes);
  comm.add_option("--max-bytes", c.comm_cfg.max_bytes);
  comm.add_option("--seconds", c.comm_cfg.seconds, "timing budget per size and algorithm");
  comm.add_option("--peer", c.comm_cfg.peer, "pytorch (gloo) or none");
  comm.add_option("--ranks-per-host", c.comm_cfg.ranks_per_host,
                  "pretend host layout: R per host, or R1,R2,... (default: mpirun's hosts)");
}

void declare(CLI::App& app, Commands& c) {
  app.require_subcommand(1);
  c.models = app.add_subcommand("models", "list the model zoo with parameter counts");
  c.train = app.add_subcommand("train", "train a model");
  add_train(*c.train, c.train_cfg);
  add_elastic(*c.train, c.elastic_cfg);
  c.generate = app.add_subcommand("generate", "sample text from a trained token model");
  add_generate(*c.generate, c.generate_cfg);
  c.simulate = app.add_subcommand("simulate", "predict a training step at 1 to 1024+ ranks (cost model)");
  add_simulate_options(*c.simulate, c.simulate_cfg);
  auto* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  c.step = bench->add_subcommand("step", "time training steps on synthetic input");
  add_step(*c.step, c.step_cfg);
  c.grid = bench->add_subcommand("grid", "run an experiment grid: cohort (and PyTorch) per point");
  add_grid(*c.grid, c.grid_flags);
  c.report = bench->add_subcommand("report", "redraw report.md and plots from DIR/results.jsonl");
  c.report->add_option("dir", c.report_dir, "a grid's results folder")->required();
  c.tune = bench->add_subcommand("tune", "find the fastest processes x threads x batch for a model");
  add_tune_options(*c.tune, c.tune_cfg);
  c.strategies =
      bench->add_subcommand("strategies", "every --parallel strategy at one global batch, one table");
  add_strategies_options(*c.strategies, c.strategies_cfg);
#if COHORT_WITH_MPI
  c.comm = bench->add_subcommand("comm", "all-reduce bus bandwidth: ring, tree, MPI, gloo");
  add_comm(*c.comm, c);
#endif
}

// cohort train: in this process, or as N ranks under mpirun (started here
// when the strategy needs ranks and this is not already an mpirun rank).
int run_train(TrainConfig& cfg, int argc, char** argv) {
  COHORT_INPUT_CHECK(cfg.workers >= 1, "--workers must be at least 1, got ", cfg.workers);
  // Strategies with a fixed shape (stages, dp x stages) start their own
  // ranks when --workers is not given; the rest need --workers N.
  const int ranks = cfg.workers > 1 ? cfg.workers : cfg.ranks_needed();
#if COHORT_WITH_MPI
  const bool rank_of_job = comm::launched_by_mpirun();
  if (ranks > 1 || rank_of_job) cfg.parallel = cfg.strategies->under_ranks(cfg.parallel);
  if (!rank_of_job && ranks > 1) {
    check_config(cfg, ranks);  // refuse bad flags once, here, before any rank starts
    return launch_workers(argc, argv, ranks, cfg.threads);
  }
  if (rank_of_job || cfg.strategy().distributed(cfg.parallel)) {
    if (std::getenv(kElasticProgress)) die_with_parent();  // an elastic job's rank
    auto world = comm::mpi_world(&argc, &argv);
    cohort::train(cfg, world.get());  // checks the flags first
    return 0;
  }
#endif
  cohort::train(cfg);
  return 0;
}

int run_step(StepBenchConfig& cfg, int argc, char** argv) {
  COHORT_INPUT_CHECK(cfg.workers >= 1, "--workers must be at least 1, got ", cfg.workers);
#if COHORT_WITH_MPI
  const bool rank_of_job = comm::launched_by_mpirun();
  if (cfg.workers > 1 || rank_of_job) cfg.parallel = cfg.strategies->under_ranks(cfg.parallel);
  if (cfg.workers > 1 && !rank_of_job) return launch_workers(argc, argv, cfg.workers, cfg.threads);
  if (rank_of_job) {
    auto world = comm::mpi_world(&argc, &argv);
    run_step_bench(cfg, world.get());
    return 0;
  }
#endif
  run_step_bench(cfg);
  return 0;
}

#if COHORT_WITH_MPI
int run_comm(Commands& c, int argc, char** argv) {
  if (c.comm_cfg.peer == "none") c.comm_cfg.peer.clear();
  COHORT_INPUT_CHECK(c.comm_workers >= 2, "--workers must be at least 2, got ", c.comm_workers);
  if (!comm::launched_by_mpirun()) return launch_workers(argc, argv, c.comm_workers, 0);
  auto world = comm::mpi_world(&argc, &argv);
  run_comm_bench(*world, c.comm_cfg);
  return 0;
}
#endif

// cohort train --elastic: this process supervises; the ranks train.
int run_elastic_train(Commands& c, int argc, char** argv, const std::set<std::string>& given) {
#if COHORT_WITH_MPI
  TrainConfig& cfg = c.train_cfg;
  ElasticConfig& e = c.elastic_cfg;
  COHORT_INPUT_CHECK(!comm::launched_by_mpirun(), "--elastic: start the supervisor outside mpirun");
  e.timeout = cfg.timeout;
  e.threads = cfg.threads;
  e.epochs = cfg.epochs;
  e.jsonl = cfg.log == "jsonl";
  COHORT_INPUT_CHECK(!given.count("--commit-every") || cfg.commit_every != 0,
                     "--elastic restarts from commits: --commit-every 0 is refused (give K, or "
                     "auto, the default)");
  cfg.parallel = cfg.strategies->under_ranks(cfg.parallel);
  check_config(cfg, std::max(e.workers, e.min_workers));  // bad train flags: once, here
  return run_elastic(e, std::vector<std::string>(argv + 1, argv + argc));
#else
  COHORT_INPUT_CHECK(false, "--elastic needs the MPI build (COHORT_MPI)");
  return 2;
#endif
}

int dispatch(Commands& c, int argc, char** argv) {
  if (*c.models) return list_models();
  if (*c.train) {
    std::set<std::string> given;
    for (const CLI::Option* o : c.train->get_options())
      if (o->count() > 0) given.insert(o->get_name());
    c.elastic_cfg.workers = given.count("--workers") ? c.train_cfg.workers : 0;
    check_elastic_flags(c.elastic_cfg, given);
    apply_config_file(*c.train, c.train_cfg);
    if (given.count("--elastic")) return run_elastic_train(c, argc, argv, given);
    return run_train(c.train_cfg, argc, argv);
  }
  if (*c.generate) {
    const auto ids = generate(c.generate_cfg);
    const int64_t vocab = nn::find_model(c.generate_cfg.model, c.generate_cfg.seq,
                                         c.generate_cfg.vocab)->classes;
    std::printf("%s\n", detokenize(ids, vocab).c_str());
    return 0;
  }
  if (*c.simulate) {
    for (const std::string& note : apply_sim_config(*c.simulate, c.simulate_cfg))
      std::fprintf(stderr, "simulate: --config %s\n", note.c_str());
    return run_simulate(c.simulate_cfg);
  }
  if (*c.tune) return run_tune(c.tune_cfg);
  if (*c.strategies) return run_strategies(c.strategies_cfg);
  if (*c.grid) return run_grid(resolve_grid(c.grid_flags)) == 0 ? 0 : 1;
  if (*c.report) {
    rebuild_report(c.report_dir);
    return 0;
  }
  if (*c.step) return run_step(c.step_cfg, argc, argv);
#if COHORT_WITH_MPI
  if (*c.comm) return run_comm(c, argc, argv);
#endif
  return 0;
}

// The first word that is not a subcommand where one is required, with the
// valid ones ("" when every word is known): CLI11 says only that a subcommand
// is required.
std::string unknown_command(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  for (int i = 1; i < argc && at->get_require_subcommand_min() > 0; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') return "";
    CLI::App* sub = nullptr;
    for (auto* s : at->get_subcommands({}))
      if (s->check_name(word)) sub = s;
    if (!sub) {
      std::string valid;
      for (auto* s : at->get_subcommands({})) valid += (valid.empty() ? "" : ", ") + s->get_name();
      return "unknown command '" + word + "' (valid: " + valid + ")";
    }
    at = sub;
  }
  return "";
}

}  // namespace

// tests/parallel/train_worker_main.cpp compiles this file with
// COHORT_CLI_MAIN renamed, to run several commands in one mpirun job.
#ifndef COHORT_CLI_MAIN
#define COHORT_CLI_MAIN main
#endif
int COHORT_CLI_MAIN(int argc, char** argv) {
  CLI::App app{"cohort: distributed deep-learning training, measured"};
  Commands commands;
  declare(app, commands);
  if (const std::string bad = unknown_command(app, argc, argv); !bad.empty()) {
    std::fprintf(stderr, "cohort: %s\n", bad.c_str());
    return 2;
  }
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
    return dispatch(commands, argc, argv);
  } catch (const InputError& e) {
    if (!quiet_rank()) std::fprintf(stderr, "cohort: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cohort: error: %s\n", e.what());
    return 1;
  }
}
