// Saving and resuming a training run: the model, the optimizer's state and
// the run's position in a safetensors checkpoint, with the state in one
// shard file per rank beside it where each rank owns its range (see resume.h).
#include "train/resume.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <exception>
#include <cstring>
#include <map>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "train/checkpoint.h"
#include "train/load_weights.h"
#include "train/state_shards.h"

namespace cohort {

namespace {

constexpr const char* kStatePrefix = "optimizer.";
constexpr const char* kStepsKey = "optimizer.steps";
// A fine-tuning run's state starts at its first trainable parameter
// (nn::Model::freeze): the tensors are {parameters - begin}.
constexpr const char* kBeginKey = "optimizer.begin";
constexpr int kGatherTag = 130;  // clear of the strategies' own tags (100-121)

void notice(bool print, const std::string& line) {
  if (print) std::fprintf(stderr, "cohort: note: %s\n", line.c_str());
}

// A non-negative integer of the file's metadata, or InputError naming the key.
int64_t read_count(const SafetensorsFile& file, const std::string& path, const std::string& key) {
  auto it = file.metadata.find(key);
  if (it == file.metadata.end())
    throw InputError("checkpoint " + path + " has no '" + key +
                     "' metadata; not written by `cohort train --save` (--load takes its weights)");
  const std::string& text = it->second;
  int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    throw InputError("checkpoint " + path + ": metadata '" + key +
                     "' is not a non-negative integer");
  return v;
}

// The hex words of an RngState, or InputError naming the key.
RngState parse_rng(const std::string& text, const std::string& path, const std::string& key) {
  RngState st{};
  const char* p = text.data();
  const char* end = text.data() + text.size();
  for (size_t i = 0; i < st.size(); ++i) {
    if (i > 0 && p < end && *p == ' ') ++p;
    auto [next, ec] = std::from_chars(p, end, st[i], 16);
    if (ec != std::errc())
      throw InputError("checkpoint " + path + ": metadata '" + key + "' is not 4 hex words");
    p = next;
  }
  if (p != end) throw InputError("checkpoint " + path + ": metadata '" + key + "' is not 4 hex words");
  return st;
}

std::string rng_text(const RngState& st) {
  char buf[80];
  std::snprintf(buf, sizeof buf, "%llx %llx %llx %llx", (unsigned long long)st[0],
                (unsigned long long)st[1], (unsigned long long)st[2], (unsigned long long)st[3]);
  return buf;
}

// A commit's position within its epoch and its dropout generators, where the
// file holds them (epoch-end saves have no position within the epoch).
void read_position_within_epoch(const SafetensorsFile& file, const std::string& path,
                                RunPosition& at) {
  if (file.metadata.count("epoch.samples")) {
    at.epoch_samples = read_count(file, path, "epoch.samples");
    const std::string& sums = file.metadata.at("epoch.sums");
    if (std::sscanf(sums.c_str(), "%lf %lf %lf", &at.epoch_sums[0], &at.epoch_sums[1],
                    &at.epoch_sums[2]) != 3)
      throw InputError("checkpoint " + path + ": metadata 'epoch.sums' is not 3 numbers");
  }
  if (!file.metadata.count("rng.world")) return;
  const int64_t world = read_count(file, path, "rng.world");
  for (int64_t r = 0; r < world; ++r) {
    const std::string key = "rng." + std::to_string(r);
    auto it = file.metadata.find(key);
    if (it == file.metadata.end())
      throw InputError("checkpoint " + path + " has no '" + key + "' metadata");
    at.rngs.push_back(parse_rng(it->second, path, key));
  }
}

// The optimizer's part of a --resume, validated against the file: the file
// tensor for each of opt's state tensors, and the step count.
struct OptimizerLoad {
  bool restore = false;
  std::vector<const Tensor*> sources;  // in opt.state_names() order; or
  bool sharded = false;                // from the shard files beside the checkpoint:
  ShardReads shards;                   // the slices of this rank's range
  int64_t steps = 0;
};

ArenaRange resolve(ArenaRange r, int64_t n) { return r.second < 0 ? ArenaRange{0, n} : r; }

// The state's first parameter in the file against this run's (--freeze).
void check_state_begin(const SafetensorsFile& file, const TrainConfig& cfg, int64_t first) {
  auto it = file.metadata.find(kBeginKey);
  const std::string theirs = it == file.metadata.end() ? "0" : it->second;
  if (theirs == std::to_string(first)) return;
  throw InputError("checkpoint " + cfg.resume + " holds optimizer state from parameter " +
                   one_line(theirs) + " on, but --freeze " + cfg.freeze + " trains from " +
                   std::to_string(first) + "; resume with the run's --freeze, or --load its weights");
}

OptimizerLoad plan_optimizer_load(const SafetensorsFile& file, const TrainConfig& cfg,
                                  const Optimizer& opt, int64_t n, int64_t first, ArenaRange range,
                                  bool print) {
  const std::string& path = cfg.resume;
  auto name = file.metadata.find("optimizer");
  if (name == file.metadata.end())
    throw InputError("checkpoint " + path +
                     " has no 'optimizer' metadata; --load takes its weights");
  if (name->second != opt.name())
    throw InputError("checkpoint " + path + " holds a run of --optimizer " +
                     one_line(name->second) + ", not " + opt.name() +
                     "; resume it with its optimizer, or --load its weights");
  OptimizerLoad plan;
  if (!file.metadata.count(kStepsKey)) {
    notice(print, path + " holds no optimizer state: " + opt.name() + " restarts from zero");
    return plan;
  }
  plan.steps = read_count(file, path, kStepsKey);
  plan.restore = true;
  check_state_begin(file, cfg, first);
  if (auto listed = file.metadata.find(kShardsKey); listed != file.metadata.end()) {
    const ShardListing listing = parse_listing(path, listed->second, n);
    const auto [begin, end] = resolve(range, n);
    plan.sharded = true;
    plan.shards = plan_shard_reads(path, listing, opt.state_names(), opt.name(), plan.steps,
                                   begin, end);
    return plan;
  }
  for (const std::string& s : opt.state_names()) {
    const std::string tensor = kStatePrefix + s;
    const Tensor* src = file.find(tensor);
    if (!src) throw InputError("checkpoint " + path + ": tensor '" + tensor + "' is missing");
    if (src->shape() != Shape{n - first})
      throw InputError("checkpoint " + path + ": tensor '" + tensor + "' has shape " +
                       shape_str(src->shape()) + ", " + opt.name() + " state needs " +
                       shape_str(Shape{n - first}));
    plan.sources.push_back(src);
  }
  return plan;
}

// One rank's part of the optimizer state for a save.
struct Holder {
  int64_t rank, begin, end, steps;
};

// The ranks whose states cover the arena once: the first rank of each
// distinct non-empty range (pipeline replicas of a stage hold the same state).
// Empty where those ranges do not tile [first, n) (first: the frozen prefix)
// or their step counts differ. Collective: every rank broadcasts its range
// and step count.
std::vector<Holder> find_holders(comm::Communicator* comm, ArenaRange mine, int64_t steps,
                                 int64_t first, int64_t n) {
  const int world = comm ? comm->size() : 1;
  std::vector<Holder> all(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    all[size_t(r)] = {r, mine.first, mine.second, steps};
    if (comm) comm->broadcast(&all[size_t(r)], sizeof(Holder), r);
  }
  std::vector<Holder> holders;
  for (const Holder& h : all) {
    const bool seen = std::any_of(holders.begin(), holders.end(), [&](const Holder& o) {
      return o.begin == h.begin && o.end == h.end;
    });
    if (h.end > h.begin && !seen) holders.push_back(h);
  }
  std::sort(holders.begin(), holders.end(),
            [](const Holder& a, const Holder& b) { return a.begin < b.begin; });
  int64_t next = first;
  for (const Holder& h : holders) {
    if (h.begin != next || h.steps != holders.front().steps) return {};
    next = h.end;
  }
  return next == n ? holders : std::vector<Holder>{};
}

// The optimizer's state tensors over the trainable arena [first, n), on rank
// 0 (empty on the others): its own range copied, every other holder's received.
std::vector<NamedTensor> gather_state(comm::Communicator* comm, Optimizer& opt,
                                      const std::vector<Holder>& holders, int64_t first,
                                      int64_t n) {
  if (holders.empty()) return {};
  const int rank = comm ? comm->rank() : 0;
  const std::vector<Tensor*> mine = opt.state();
  const std::vector<std::string> names = opt.state_names();
  const bool holding =
      std::any_of(holders.begin(), holders.end(), [&](const Holder& h) { return h.rank == rank; });
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (rank != 0) {
      if (holding) comm->send(mine[i]->data(), mine[i]->nbytes(), 0, kGatherTag);
      continue;
    }
    Tensor full = Tensor::empty({n - first});
    for (const Holder& h : holders) {
      Tensor dst = full.slice(h.begin - first, h.end - first);
      if (h.rank == 0)
        dst.copy_from(*mine[i]);
      else
        comm->recv(dst.data(), dst.nbytes(), int(h.rank), kGatherTag);
    }
    out.push_back({kStatePrefix + names[i], full});
  }
  return out;
}

}  // namespace

// Rng is its four words of state and nothing else (trivially copyable), so
// its bytes are the state; checked here rather than widening its interface.
static_assert(std::is_trivially_copyable_v<Rng> && sizeof(Rng) == sizeof(RngState));

RngState rng_state(const Rng& rng) {
  RngState s;
  std::memcpy(s.data(), &rng, sizeof s);
  return s;
}

void set_rng_state(Rng& rng, const RngState& state) {
  std::memcpy(static_cast<void*>(&rng), state.data(), sizeof state);
}

RunPosition restore_checkpoint(const TrainConfig& cfg, nn::Model& model, Optimizer& opt,
                               ArenaRange range, bool print) {
  COHORT_INPUT_CHECK(!cfg.load_partial || !cfg.load.empty(), "--load-partial applies to --load");
  if (!cfg.load.empty()) {
    const LoadOptions options{model.spec().head, cfg.load_partial};
    const LoadReport report =
        load_weights(cfg.load, model.name(), model.params(), &model.buffers(), options);
    notice(print, report.line(cfg.load));
    return {};
  }
  if (cfg.resume.empty()) return {};
  const std::string& path = cfg.resume;
  const SafetensorsFile file = load_safetensors(path);
  const std::vector<TensorCopy> weights =
      plan_checkpoint_load(file, path, model.name(), model.params(), &model.buffers());
  RunPosition at;
  const int64_t epoch = read_count(file, path, "epoch");
  at.updates = read_count(file, path, "updates");
  COHORT_INPUT_CHECK(epoch < cfg.epochs, "checkpoint ", path, " finished epoch ", epoch,
                     " of a run that --epochs ", cfg.epochs,
                     " ends there; --epochs counts the whole run, raise it to train on");
  at.epoch = int(epoch);
  if (auto it = file.metadata.find("loss_scale"); it != file.metadata.end())
    at.loss_scale = it->second;
  read_position_within_epoch(file, path, at);
  const int64_t n = model.num_params();
  const int64_t first = model.frozen_params();
  const OptimizerLoad state = plan_optimizer_load(file, cfg, opt, n, first, range, print);
  // Everything is validated: only now modify the model and the optimizer.
  apply_copies(weights);
  const auto [begin, end] = resolve(range, n);
  if (state.restore && end > begin) {
    opt.init_state(end - begin);
    const std::vector<Tensor*> dst = opt.state();
    if (state.sharded) {
      apply_shard_reads(state.shards, opt.state_names(), dst);
    } else {
      COHORT_CHECK(dst.size() == state.sources.size(), opt.name(), " state tensors");
      for (size_t i = 0; i < dst.size(); ++i)
        dst[i]->copy_from(state.sources[i]->slice(begin - first, end - first));
    }
    opt.set_steps(state.steps);
  }
  return at;
}

namespace {

std::map<std::string, std::string> run_metadata(const TrainConfig& cfg, const Optimizer& opt,
                                                const RunPosition& done) {
  std::map<std::string, std::string> meta = {{"epoch", std::to_string(done.epoch)},
                                             {"updates", std::to_string(done.updates)},
                                             {"dataset", cfg.data},
                                             {"parallel", cfg.parallel},
                                             {"optimizer", opt.name()}};
  if (!done.loss_scale.empty()) meta["loss_scale"] = done.loss_scale;
  if (done.epoch_samples > 0) {
    meta["epoch.samples"] = std::to_string(done.epoch_samples);
    char sums[96];
    std::snprintf(sums, sizeof sums, "%.17g %.17g %.17g", done.epoch_sums[0], done.epoch_sums[1],
                  done.epoch_sums[2]);
    meta["epoch.sums"] = sums;
  }
  if (!done.rngs.empty()) {
    meta["rng.world"] = std::to_string(done.rngs.size());
    for (size_t r = 0; r < done.rngs.size(); ++r)
      meta["rng." + std::to_string(r)] = rng_text(done.rngs[r]);
  }
  return meta;
}

// Rank 0 writes the checkpoint file itself (the weights, and `state` where
// gathered) with the whole model in its arena: ZeRO-3 gathers it for the
// write and releases it after (collective). Rank 0's failure is returned.
std::exception_ptr write_main_file(const TrainConfig& cfg, nn::Model& model,
                                   comm::Communicator* comm, Strategy* strategy,
                                   const std::map<std::string, std::string>& meta,
                                   const std::vector<NamedTensor>& state) {
  std::exception_ptr failure;
  if (strategy) strategy->gather_params(0);
  if (!comm || comm->rank() == 0) {
    try {
      save_checkpoint(cfg.save, model.name(), model.params(), &model.buffers(), meta, state);
    } catch (const std::exception&) {
      failure = std::current_exception();
    }
  }
  if (strategy) strategy->release_params();
  return failure;
}

// The sharded save (state_shards.h): every rank writes its range of the
// optimizer state to its own file, the ranks agree that every one is in
// place, and only then does rank 0 write F listing them; a failure anywhere
// is every rank's Error, and the new shards are removed, so F and the files
// it lists stay as they were. Collective.
void save_sharded(const TrainConfig& cfg, nn::Model& model, Optimizer& opt, ArenaRange range,
                  comm::Communicator& comm, Strategy* strategy,
                  const std::vector<Holder>& holders, std::map<std::string, std::string> meta) {
  const std::string& path = cfg.save;
  const int rank = comm.rank(), world = comm.size();
  const int64_t n = model.num_params(), steps = holders.front().steps;
  int64_t generation = rank == 0 ? listed_generation(path) + 1 : 0;
  comm.broadcast(&generation, sizeof generation, 0);
  const std::string mine = beside(path, shard_name(path, generation, rank, world));

  std::exception_ptr failure;
  int64_t bytes = -1;  // -1: not written
  try {
    bytes = int64_t(write_shard(mine, opt.state_names(), opt.state(), range.first, range.second,
                                generation,
                                {{"model", model.name()},
                                 {"optimizer", opt.name()},
                                 {kStepsKey, std::to_string(steps)},
                                 {"parameters", std::to_string(n)}}));
  } catch (const std::exception&) {
    failure = std::current_exception();
  }
  auto abandon = [&](const std::string& why) {
    if (bytes >= 0) std::remove(mine.c_str());
    if (failure) std::rethrow_exception(failure);
    throw Error("saving " + path + " failed: " + why + "; " + path + " kept as it was");
  };
  std::vector<int64_t> sizes(size_t(world), bytes);
  for (int r = 0; r < world; ++r) comm.broadcast(&sizes[size_t(r)], sizeof(int64_t), r);
  for (int r = 0; r < world; ++r)
    if (sizes[size_t(r)] < 0) abandon("rank " + std::to_string(r) + " could not write its shard");

  ShardListing listing{generation, n, model.frozen_params(), {}};
  for (const Holder& h : holders)  // in arena order
    listing.files.push_back({shard_name(path, generation, int(h.rank), world), h.begin, h.end,
                             uint64_t(sizes[size_t(h.rank)])});
  meta[kStepsKey] = std::to_string(steps);
  meta[kShardsKey] = listing_json(listing);
  failure = write_main_file(cfg, model, &comm, strategy, meta, {});
  int64_t saved = failure ? 0 : 1;
  comm.broadcast(&saved, sizeof saved, 0);
  if (!saved) abandon("rank 0 could not write it");
  // F now lists the new shards: the previous save's are stale.
  if (rank == 0) remove_stale_shards(path, listing);
}

}  // namespace

void save_run_checkpoint(const TrainConfig& cfg, nn::Model& model, Optimizer& opt, ArenaRange range,
                         comm::Communicator* comm, Strategy* strategy, const RunPosition& done,
                         bool print) {
  const int64_t n = model.num_params();
  range = resolve(range, n);
  if (range.second > range.first) opt.init_state(range.second - range.first);  // no-op once stepped
  const int64_t first = model.frozen_params();
  const std::vector<Holder> holders = find_holders(comm, range, opt.steps(), first, n);
  std::map<std::string, std::string> meta = run_metadata(cfg, opt, done);
  if (first > 0) meta[kBeginKey] = std::to_string(first);
  // Every rank owns its own range (ZeRO): each writes it, nothing is gathered.
  if (comm && comm->size() > 1 && holders.size() == size_t(comm->size()))
    return save_sharded(cfg, model, opt, range, *comm, strategy, holders, std::move(meta));
  std::vector<NamedTensor> state = gather_state(comm, opt, holders, first, n);
  if (holders.empty())
    notice(print, "--parallel " + cfg.parallel + ": the ranks' optimizer states do not make one" +
                      " (ranges or step counts differ), so " + cfg.save +
                      " holds the weights and the run's position only");
  else
    meta[kStepsKey] = std::to_string(holders.front().steps);
  if (std::exception_ptr failure = write_main_file(cfg, model, comm, strategy, meta, state))
    std::rethrow_exception(failure);
  // A previous sharded save's files: F, in place, no longer lists them.
  if (!comm || comm->rank() == 0) remove_stale_shards(cfg.save, {});
}

}  // namespace cohort
