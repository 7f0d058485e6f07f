// Saving and resuming a training run: the model, the optimizer's state and
// the run's position in one safetensors checkpoint (see resume.h).
#include "train/resume.h"

#include <charconv>
#include <cstdio>
#include <vector>

#include "core/error.h"
#include "train/checkpoint.h"

namespace cohort {

namespace {

constexpr const char* kStatePrefix = "optimizer.";
constexpr const char* kStepsKey = "optimizer.steps";

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
    throw InputError("checkpoint " + path + " has no 'optimizer' metadata; --load takes its weights");
  if (name->second != opt.name())
    throw InputError("checkpoint " + path + " holds a run of --optimizer " + name->second +
                     ", not " + opt.name() + "; resume it with its optimizer, or --load its weights");
  OptimizerLoad plan;
  const bool saved = file.metadata.count(kStepsKey) > 0;
  if (!whole_optimizer_on_rank0(cfg.parallel)) {
    notice(print, "--parallel " + cfg.parallel + " splits the optimizer state over ranks: " +
                      opt.name() + " restarts from zero; weights and position come from " + path);
    return plan;
  }
  if (!saved) {
    notice(print, path + " holds no optimizer state (saved under a strategy that splits it): " +
                      opt.name() + " restarts from zero");
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

}  // namespace

bool whole_optimizer_on_rank0(const std::string& parallel) {
  return parallel == "none" || parallel == "dp" || parallel == "replicas";
}

RunPosition restore_checkpoint(const TrainConfig& cfg, nn::Model& model, Optimizer& opt,
                               bool print) {
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
  const int64_t n = model.num_params();
  const OptimizerLoad state = plan_optimizer_load(file, cfg, opt, n, print);
  // Everything is validated: only now modify the model and the optimizer.
  apply_copies(weights);
  if (state.restore) {
    opt.init_state(n);
    const std::vector<Tensor*> dst = opt.state();
    COHORT_CHECK(dst.size() == state.sources.size(), opt.name(), " state tensors");
    for (size_t i = 0; i < dst.size(); ++i) dst[i]->copy_from(*state.sources[i]);
    opt.set_steps(state.steps);
  }
  return at;
}

void save_run_checkpoint(const TrainConfig& cfg, nn::Model& model, Optimizer& opt,
                         const RunPosition& done, bool print) {
  std::map<std::string, std::string> meta = {{"epoch", std::to_string(done.epoch)},
                                             {"updates", std::to_string(done.updates)},
                                             {"dataset", cfg.data},
                                             {"parallel", cfg.parallel},
                                             {"optimizer", opt.name()}};
  std::vector<NamedTensor> state;
  if (whole_optimizer_on_rank0(cfg.parallel)) {
    opt.init_state(model.num_params());  // no-op once the first step has run
    const std::vector<Tensor*> tensors = opt.state();
    const std::vector<std::string> names = opt.state_names();
    for (size_t i = 0; i < tensors.size(); ++i)
      state.push_back({kStatePrefix + names[i], *tensors[i]});
    meta[kStepsKey] = std::to_string(opt.steps());
  } else {
    notice(print, "--parallel " + cfg.parallel + " splits the optimizer state over ranks: " +
                      cfg.save + " holds the weights and the run's position only");
  }
  save_checkpoint(cfg.save, model.name(), model.params(), &model.buffers(), meta, state);
}

}  // namespace cohort
