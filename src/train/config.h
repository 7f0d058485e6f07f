// Everything `cohort train` is told, in one place (flags fill it; a config
// file could too). Defaults follow the studies: Adam, lr 0.001, batch 128.
#pragma once
#include <cstdint>
#include <sstream>
#include <string>

namespace cohort {

struct TrainConfig {
  std::string model = "mnist-small";
  std::string data = "fashion-mnist";
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int epochs = 2;
  int64_t batch = 128;
  float lr = 0.001f;
  std::string optimizer = "adam";
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  std::string schedule = "constant";
  int64_t warmup_steps = 0;
  float clip_norm = 0.0f;
  int threads = 0;  // 0: the machine's CPUs / the job's ranks on it
  uint64_t seed = 0;
  int repeat = 1;
  int64_t limit = 0;  // keep the first N training images (0: all)
  std::string log = "human";  // human | jsonl
  std::string eval = "epoch";  // evaluate after every epoch, or only after the last
  std::string save, load, resume;  // train/resume.h

  // Parallelism (src/parallel/).
  std::string parallel = "none";  // none | dp | replicas | mp | pp | hybrid | ps
  int stages = 2;                 // --parallel mp|pp|hybrid: stages, one rank each
  std::string split;              // inner cut points ("3,7"); empty: balanced (--balance)
  std::string balance = "params"; // params | time: what balanced stages share equally
  int micro_batches = 4;          // --parallel pp|hybrid: micro-batches per batch
  std::string pipe_schedule = "1f1b";  // gpipe | 1f1b
  int dp = 1;                     // --parallel hybrid: data-parallel replicas of the pipeline
  int servers = 1;                // --parallel ps: server ranks (the last S ranks)
  std::string ps_mode = "sync";   // sync | async
  int staleness = -1;             // --ps-mode async: max steps a worker may run ahead (-1: no bound)
  int replicas = 2;               // --parallel replicas: replica threads in one process
  int workers = 1;                // >1: start that many ranks with mpirun on this machine
  std::string allreduce = "auto"; // ring | tree | mpi | auto
  double bucket_mb = 25;
  bool overlap = true;
  int accumulate = 1;
  double timeout = 0;             // seconds before a stalled collective is reported (0: off)
  bool deterministic = false;     // fixed reduction order: bit-for-bit repeatable runs

  // Ranks the parallel strategy needs (0: any number, e.g. dp, ps).
  int ranks_needed() const;
  // The flags as "--name value" lines, compared across ranks at start.
  std::string describe() const;
};

}  // namespace cohort
