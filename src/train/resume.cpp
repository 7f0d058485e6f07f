// Saving and resuming a training run: the model, the optimizer's state and
// the run's position in one safetensors checkpoint (see resume.h).
#include "train/resume.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <vector>

#include "core/error.h"
#include "train/checkpoint.h"

namespace cohort {

namespace {

constexpr const char* kStatePrefix = "optimizer.";
constexpr const char* kStepsKey = "optimizer.steps";
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

// The optimizer's part of a --resume, validated against the file: the file
// tensor for each of opt's state tensors, and the step count.
struct OptimizerLoad {
  bool restore = false;
  std::vector<const Tensor*> sources;  // in opt.state_names() order
  int64_t steps = 0;
};

OptimizerLoad plan_optimizer_load(const SafetensorsFile& file, const TrainConfig& cfg,
                                  const Optimizer& opt, int64_t n, bool print) {
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
  for (const std::string& s : opt.state_names()) {
    const std::string tensor = kStatePrefix + s;
    const Tensor* src = file.find(tensor);
    if (!src) throw InputError("checkpoint " + path + ": tensor '" + tensor + "' is missing");
    if (src->shape() != Shape{n})
      throw InputError("checkpoint " + path + ": tensor '" + tensor + "' has shape " +
                       shape_str(src->shape()) + ", " + opt.name() + " state needs " +
                       shape_str(Shape{n}));
    plan.sources.push_back(src);
  }
  plan.restore = true;
  return plan;
}

ArenaRange resolve(ArenaRange r, int64_t n) { return r.second < 0 ? ArenaRange{0, n} : r; }

// One rank's part of the optimizer state for a save.
struct Holder {
  int64_t rank, begin, end, steps;
};

// The ranks whose states cover the arena once: the first rank of each
// distinct non-empty range (pipeline replicas of a stage hold the same state).
// Empty where those ranges do not tile [0, n) or their step counts differ.
// Collective: every rank broadcasts its range and step count.
std::vector<Holder> find_holders(comm::Communicator* comm, ArenaRange mine, int64_t steps,
                                 int64_t n) {
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
  int64_t next = 0;
  for (const Holder& h : holders) {
    if (h.begin != next || h.steps != holders.front().steps) return {};
    next = h.end;
  }
  return next == n ? holders : std::vector<Holder>{};
}

// The optimizer's state tensors over the whole arena, on rank 0 (empty on
// the others): its own range copied, every other holder's received.
std::vector<NamedTensor> gather_state(comm::Communicator* comm, Optimizer& opt,
                                      const std::vector<Holder>& holders, int64_t n) {
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
    Tensor full = Tensor::empty({n});
    for (const Holder& h : holders) {
      Tensor dst = full.slice(h.begin, h.end);
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

RunPosition restore_checkpoint(const TrainConfig& cfg, nn::Model& model, Optimizer& opt,
                               ArenaRange range, bool print) {
  if (!cfg.load.empty()) {
    load_checkpoint(cfg.load, model.name(), model.params(), &model.buffers());
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
  const int64_t n = model.num_params();
  const OptimizerLoad state = plan_optimizer_load(file, cfg, opt, n, print);
  // Everything is validated: only now modify the model and the optimizer.
  apply_copies(weights);
  const auto [begin, end] = resolve(range, n);
  if (state.restore && end > begin) {
    opt.init_state(end - begin);
    const std::vector<Tensor*> dst = opt.state();
    COHORT_CHECK(dst.size() == state.sources.size(), opt.name(), " state tensors");
    for (size_t i = 0; i < dst.size(); ++i) dst[i]->copy_from(state.sources[i]->slice(begin, end));
    opt.set_steps(state.steps);
  }
  return at;
}

void save_run_checkpoint(const TrainConfig& cfg, nn::Model& model, Optimizer& opt, ArenaRange range,
                         comm::Communicator* comm, const RunPosition& done, bool print) {
  const int64_t n = model.num_params();
  range = resolve(range, n);
  if (range.second > range.first) opt.init_state(range.second - range.first);  // no-op once stepped
  const std::vector<Holder> holders = find_holders(comm, range, opt.steps(), n);
  std::vector<NamedTensor> state = gather_state(comm, opt, holders, n);
  if (comm && comm->rank() != 0) return;
  std::map<std::string, std::string> meta = {{"epoch", std::to_string(done.epoch)},
                                             {"updates", std::to_string(done.updates)},
                                             {"dataset", cfg.data},
                                             {"parallel", cfg.parallel},
                                             {"optimizer", opt.name()}};
  if (!done.loss_scale.empty()) meta["loss_scale"] = done.loss_scale;
  if (holders.empty())
    notice(print, "--parallel " + cfg.parallel + ": the ranks' optimizer states do not make one" +
                      " (ranges or step counts differ), so " + cfg.save +
                      " holds the weights and the run's position only");
  else
    meta[kStepsKey] = std::to_string(holders.front().steps);
  save_checkpoint(cfg.save, model.name(), model.params(), &model.buffers(), meta, state);
}

}  // namespace cohort
