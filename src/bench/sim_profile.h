// The cost model's compute half (`cohort simulate`): each top-level layer's
// forward and backward seconds at a per-rank batch, its parameter count,
// the activation bytes leaving it and its forward FLOPs, plus the loss and
// the optimizer step; measured on this machine (what `--balance time`
// measures) or read from a JSON file another machine wrote.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cohort::sim {

struct LayerCost {
  std::string name;
  double forward = 0, backward = 0;  // seconds at the profile's batch
  int64_t params = 0;                // parameters (f32 elements) the layer owns
  double out_bytes = 0;              // f32 activation bytes per sample leaving the layer
  double flops = 0;                  // forward FLOPs per sample
  // The parameters of each module with parameters inside it, in forward
  // order (ZeRO-3 gathers a layer larger than a bucket leaf by leaf); empty
  // where unknown: the layer is one unit.
  std::vector<int64_t> leaves;
};

struct Profile {
  std::string model;
  int64_t batch = 1;       // the per-rank batch the seconds are for
  int64_t positions = 1;   // tokens per sample (1 for images)
  int threads = 1;         // threads per process when measured
  double optimizer = 0;    // seconds of one optimizer step over every parameter
  // Seconds per byte to write into pages released with madvise (ZeRO-3's
  // gathered layers: page faults, the kernel's zeroing and the copy), CPU
  // work of the rank; 0 where gathers land in memory kept mapped (GPUs).
  double refill = 0;
  // The same into a mapping under kHugePagesFrom (core/memory.h), 4 KiB
  // pages: an arena of fewer than 16M parameters. 0: not measured, as refill
  // (a 4 KiB fault cost 11.7 us on session 26's machine, 35x a huge page's
  // share).
  double refill_small = 0;
  // Seconds per byte the kernel adds when it first reads pages of such a
  // mapping that the rank has just refilled, over reading them again: what
  // a TCP send of ZeRO's released-and-refilled gradients pays (the ring's
  // sends across hosts). 4 MB took 14 ms the first time and 0.7 the second
  // on session 34's machine (AMD EPYC, a guest whose kernel-mode accesses
  // map a user page apart from the user's); ~0 on bare metal. 0: not
  // measured (profiles before session 34).
  double send_refilled = 0;
  // The other way round: seconds per byte the process adds when it first
  // reads pages of such a mapping that the kernel has just filled from a
  // socket (a receive into released pages), over reading them again:
  // ZeRO-3's gathers between hosts. 4 MB: 7-10 ms, again 0.2-0.3, on
  // session 34's guest. 0: not measured (profiles before session 34).
  double read_received = 0;
  // Seconds a thread that gives its core to a busy one waits to get it back
  // (the scheduler's slice as it runs here): a ZeRO-3 gather is a pair of
  // transfers, each waiting for the peer's communication thread, which
  // waits for a core while the ranks' compute threads hold them. 0: not
  // measured (profiles before session 30), or no wait.
  double handover = 0;
  // Seconds, on average, that a communication thread waiting as the
  // engine's do (comm::idle: spin, yield, then naps) on a core held by a
  // busy thread takes to notice a message set from another core 0.2-8 ms
  // into its wait: what a ZeRO-3 transfer waits where threads outnumber
  // cores (transfer_wait()). Session 48 found the yield's figure (handover)
  // 3.94 ms on every guest while what ZeRO-3's transfers paid varied from
  // about 0.7 ms to over 4 (run 41's guest: ~0-2 ms; this wait read 1.8-2.0
  // ms there). 0: not measured (profiles before session 48), or fewer than
  // 2 cores.
  double poll_wait = 0;
  // How much one rank's step varies from one step to the next, as a
  // fraction of its median: the interquartile range of its 32 timed passes over
  // 1.349 (a standard deviation that one pass slowed by another process does
  // not inflate). Ranks in lockstep each wait, every step, for the slowest:
  // session 44's timelines on a shared 2-vCPU guest had dp ranks computing
  // at one rank's own pace with steps varying ~x1.2, and the faster rank
  // waiting 9-23 ms a step of ~210. 0: not measured, or no variation.
  double step_spread = 0;
  // The refill rate of an arena of `bytes` bytes.
  double refill_for(double bytes) const;
  // send_refilled and read_received for an arena of `bytes` bytes: 0 on
  // huge pages.
  double send_refilled_for(double bytes) const;
  double read_received_for(double bytes) const;
  // What a ZeRO-3 transfer waits for the peer's communication thread where
  // threads outnumber cores: poll_wait where measured, else handover.
  double transfer_wait() const { return poll_wait > 0 ? poll_wait : handover; }
  std::string source = "measured";  // or the file it came from
  std::vector<LayerCost> layers;
  // A parameter two layers share (GPT-2's wte, read again by lm_head): the
  // owner's layer holds it in the arena; `layer` reads it too. A pipeline
  // that cuts them apart sums its gradient and broadcasts it every step.
  struct Tie {
    size_t layer = 0, owner = 0;  // indices into layers
    int64_t params = 0;           // elements shared
  };
  std::vector<Tie> ties;

  int64_t params() const;
  double forward() const;
  double backward() const;
  // The same figures at another batch (compute scales linearly with rows:
  // an approximation that holds while a rank's batch keeps its cores busy).
  Profile at_batch(int64_t rows) const;
};

// Times `model` (zoo name; seq/vocab 0: the model's) on this machine at
// `batch` rows with `threads` OpenMP threads: best of a few runs per layer
// after a warm-up, the loss folded into the last layer's forward and
// backward, Adam's step over the whole arena, the page refill rate, and the
// spread of the passes' totals (step_spread).
Profile measure_profile(const std::string& model, int64_t seq, int64_t vocab, int64_t batch,
                        int threads);

// Profile::poll_wait, measured here (about 1 s).
double time_poll_wait();

// step_spread from passes' seconds (interquartile range / 1.349 / median;
// 0 for fewer than 4).
double spread_of(std::vector<double> passes);

// Fills each layer's `leaves` from the model's registration (nothing is
// allocated); a profile whose layers do not match the model's is left whole.
void attach_leaves(Profile& p, int64_t seq, int64_t vocab);

// A profile from the model's FLOPs alone: forward = FLOPs x batch / rate,
// backward twice that, no optimizer time: another machine's figures from
// its FLOP rate (`--compute flops:GFLOPS`).
Profile flops_profile(const std::string& model, int64_t seq, int64_t vocab, int64_t batch,
                      double gflops);

// JSON round trip ({"model", "batch", "positions", "threads", "optimizer_s",
// "refill_s_per_byte", "refill_small_s_per_byte", "handover_s", "poll_wait_s", "step_spread" (each optional: 0), "layers": [{"name", "forward_s", "backward_s", "params", "out_bytes",
// "flops"}], "ties" (optional): [{"layer", "owner", "params"}]}). load: InputError naming the file and the key at fault.
void save_profile(const Profile& p, const std::string& path);
Profile load_profile(const std::string& path);

}  // namespace cohort::sim
