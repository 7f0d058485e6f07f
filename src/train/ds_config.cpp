// DeepSpeed's ds_config keys onto cohort's flags (the table: docs/DESIGN.md).
// Defaults follow DeepSpeed where a key is absent but its section is there
// (Adam's eps 1e-8, warm-up 1000 steps, cos_min_ratio 1e-4), so a file means
// what it means to DeepSpeed.
#include "train/ds_config.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <vector>

#include "core/error.h"

namespace cohort {
namespace {

using json = nlohmann::json;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMaxCount = 1e15;  // integers above this are no batch or step count
const json kEmpty = json::object();

// One object of the file: typed reads that remember the keys read, so that
// finish() can refuse the others by name.
class Section {
 public:
  Section(const json& j, std::string where, const std::string& path)
      : j_(j), where_(std::move(where)), path_(path) {
    if (!j.is_object()) fail("", "expected an object, got " + j.dump());
  }

  // "--config PATH: where.key: what".
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    std::string name = where_.empty() ? key : key.empty() ? where_ : where_ + "." + key;
    throw InputError("--config " + path_ + ": " + (name.empty() ? "" : name + ": ") + what);
  }

  const json* get(const std::string& key) {
    if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.push_back(key);
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  // A nested section (an empty one when absent).
  Section section(const std::string& key) {
    const json* v = get(key);
    return Section(v ? *v : kEmpty, where_.empty() ? key : where_ + "." + key, path_);
  }
  bool has(const std::string& key) const { return j_.contains(key); }

  // A number in [lo, hi]; `range` says so in the error.
  std::optional<double> number(const std::string& key, double lo, double hi, const char* range) {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) fail(key, "expected a number, got " + v->dump());
    const double x = v->get<double>();
    if (!(x >= lo && x <= hi)) fail(key, detail::concat("expected ", range, ", got ", v->dump()));
    return x;
  }
  std::optional<double> positive(const std::string& key) {
    auto x = number(key, 0, kInf, "a positive number");
    if (x && *x == 0) fail(key, "expected a positive number, got 0");
    return x;
  }
  // ds_configs write bucket sizes as 5e8: a whole float is an integer too.
  std::optional<int64_t> integer(const std::string& key, double lo, double hi, const char* range) {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number() || std::trunc(v->get<double>()) != v->get<double>())
      fail(key, "expected an integer, got " + v->dump());
    number(key, lo, hi, range);
    return int64_t(v->get<double>());
  }
  std::optional<bool> boolean(const std::string& key) {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) fail(key, "expected true or false, got " + v->dump());
    return v->get<bool>();
  }
  std::optional<std::string> string(const std::string& key) {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) fail(key, "expected a string, got " + v->dump());
    return v->get<std::string>();
  }

  // Accepts every key not read so far, unread.
  void ignore_rest() {
    for (auto& [key, value] : j_.items()) known_.push_back(key);
  }

  // Refuses every key no read asked for.
  void finish() const {
    for (auto& [key, value] : j_.items()) {
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      std::string valid;
      for (auto& k : known_) valid += (valid.empty() ? "" : ", ") + k;
      fail(key, "not a key cohort reads here (valid: " + valid + ")");
    }
  }

 private:
  const json& j_;
  std::string where_;
  const std::string& path_;
  std::vector<std::string> known_;
};

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// What the file sets, one reader per section; `free(flag)`: the command line
// left that flag to the file.
struct Reader {
  TrainConfig& cfg;
  const std::set<std::string>& given;
  int world;
  std::vector<std::string> strategy_args;  // the families' flags, parsed at the end
  std::optional<double> cos_min_ratio;     // WarmupCosineLR's floor, once lr is known

  bool free(const char* flag) const { return given.count(flag) == 0; }
  void note(const std::string& s) { cfg.config_notes.push_back(s); }

  // DeepSpeed's rule: train_batch_size = micro x accumulation x world; any two
  // determine the third. A flag takes its key's place, and the other per-rank
  // key is derived again from the file's train_batch_size where it stands.
  void batch(Section& root) {
    auto train = root.integer("train_batch_size", 1, kMaxCount, "a positive integer");
    auto micro = root.integer("train_micro_batch_size_per_gpu", 1, kMaxCount, "a positive integer");
    auto gas = root.integer("gradient_accumulation_steps", 1, 1e9, "a positive integer");
    std::string micro_key = "train_micro_batch_size_per_gpu",
                gas_key = "gradient_accumulation_steps";
    const bool batch_flag = !free("--batch"), accumulate_flag = !free("--accumulate");
    if (batch_flag) micro = cfg.batch, micro_key = "--batch";
    if (accumulate_flag) gas = cfg.accumulate, gas_key = "--accumulate";
    if (batch_flag && accumulate_flag)
      train.reset();
    else if (batch_flag && train)
      gas.reset();
    else if (accumulate_flag && train)
      micro.reset();
    if (train && micro && gas) {
      if (*train != *micro * *gas * world)
        root.fail("", detail::concat("train_batch_size ", *train, " != ", micro_key, " ", *micro,
                                     " * ", gas_key, " ", *gas, " * world size ", world,
                                     " (= ", *micro * *gas * world, ")"));
    } else if (train && micro) {
      if (*train % (*micro * world) != 0)
        root.fail("", detail::concat("train_batch_size ", *train, " is not divisible by ",
                                     micro_key, " ", *micro, " * world size ", world));
      gas = *train / (*micro * world);
    } else if (train && gas) {
      if (*train % (*gas * world) != 0)
        root.fail("", detail::concat("train_batch_size ", *train, " is not divisible by ", gas_key,
                                     " ", *gas, " * world size ", world));
      micro = *train / (*gas * world);
    } else if (train) {
      if (*train % world != 0)
        root.fail("", detail::concat("train_batch_size ", *train,
                                     " is not divisible by world size ", world));
      micro = *train / world;
      gas = 1;
    }
    if (micro && free("--batch")) cfg.batch = *micro;
    if (gas && free("--accumulate")) cfg.accumulate = int(*gas);
  }

  // DeepSpeed's "Adam" is AdamW (decoupled weight decay) unless adam_w_mode
  // is false; with no weight decay the two make the same updates.
  void optimizer(Section& root) {
    if (!root.has("optimizer")) return;
    Section opt = root.section("optimizer");
    const auto type = opt.string("type");
    if (!type) opt.fail("type", "missing (Adam, AdamW or SGD)");
    const std::string t = lower(*type);
    if (t != "adam" && t != "adamw" && t != "sgd")
      opt.fail("type", "cohort has no '" + *type + "' (valid: Adam, AdamW, SGD)");
    Section p = opt.section("params");
    const bool sgd = t == "sgd";
    const auto lr = p.positive("lr");
    const auto wd = p.number("weight_decay", 0, kInf, "0 or more");
    if (p.has("max_grad_norm"))
      p.fail("max_grad_norm", "DeepSpeed refuses it too: use the top-level gradient_clipping");
    for (const char* k : {"betas", "eps", "adam_w_mode", "torch_adam"})
      if (sgd && p.has(k)) p.fail(k, "an Adam parameter, not SGD's");
    if (!sgd && p.has("momentum")) p.fail("momentum", "SGD's; Adam's momentum is betas");
    const auto momentum = p.number("momentum", 0, 1, "0..1");
    const auto eps = p.positive("eps");
    const auto adam_w_mode = p.boolean("adam_w_mode");
    if (p.boolean("torch_adam")) note("optimizer.params.torch_adam: cohort's own Adam");
    std::optional<std::pair<double, double>> betas;
    if (const json* b = p.get("betas")) {
      if (!b->is_array() || b->size() != 2 || !(*b)[0].is_number() || !(*b)[1].is_number())
        p.fail("betas", "expected [beta1, beta2], got " + b->dump());
      betas = {(*b)[0].get<double>(), (*b)[1].get<double>()};
      if (!(betas->first >= 0 && betas->first < 1 && betas->second >= 0 && betas->second < 1))
        p.fail("betas", "expected each in [0, 1), got " + b->dump());
    }
    p.finish();
    opt.finish();
    if (lr && free("--lr")) cfg.lr = float(*lr);
    if (wd && free("--weight-decay")) cfg.weight_decay = float(*wd);
    if (sgd) {
      // torch.optim.SGD's momentum is 0 unless given (cohort's flag defaults to 0.9).
      if (free("--momentum")) cfg.momentum = float(momentum.value_or(0));
    } else {
      if (betas && free("--adam-beta1")) cfg.beta1 = float(betas->first);
      if (betas && free("--adam-beta2")) cfg.beta2 = float(betas->second);
      if (free("--adam-eps")) cfg.eps = float(eps.value_or(1e-8));  // DeepSpeed's default
    }
    if (free("--optimizer")) {
      const bool decoupled = t == "adamw" || adam_w_mode.value_or(true);
      cfg.optimizer = sgd ? "sgd" : decoupled && cfg.weight_decay > 0 ? "adamw" : "adam";
    }
  }

  // The three warm up linearly from 0 (with warmup_type "linear") as cohort's
  // schedules do; then WarmupLR holds the peak (constant), WarmupDecayLR
  // decays linearly to 0 at total_num_steps (linear) and WarmupCosineLR
  // follows a half-cosine down to lr x cos_min_ratio (cosine). DeepSpeed's
  // default log warm-up has no cohort schedule.
  void scheduler(Section& root) {
    if (!root.has("scheduler")) return;
    Section s = root.section("scheduler");
    const auto type = s.string("type");
    if (!type) s.fail("type", "missing (WarmupLR, WarmupDecayLR or WarmupCosineLR)");
    const bool cosine = *type == "WarmupCosineLR", decay = *type == "WarmupDecayLR";
    if (!cosine && !decay && *type != "WarmupLR")
      s.fail("type",
             "cohort has no '" + *type + "' (valid: WarmupLR, WarmupDecayLR, WarmupCosineLR)");
    Section p = s.section("params");
    const auto warmup = p.integer("warmup_num_steps", 1, kMaxCount, "a positive integer");
    const auto warmup_type = p.string("warmup_type");
    if (warmup_type.value_or("log") != "linear")
      p.fail("warmup_type",
             warmup_type ? "'" + *warmup_type + "': cohort warms up linearly only (\"linear\")"
                         : "absent means DeepSpeed's log warm-up; cohort warms "
                           "up linearly: set \"warmup_type\": \"linear\"");
    if (const auto last = p.integer("last_batch_iteration", -1, kMaxCount, "-1 or more");
        last && *last != -1)
      p.fail("last_batch_iteration", "cohort resumes a schedule with --resume: expected -1");
    if (cosine || decay) {
      const auto total = p.integer("total_num_steps", 1, kMaxCount, "a positive integer");
      if (!total) p.fail("total_num_steps", "missing (" + *type + " needs it)");
      // DeepSpeed warns and then holds the rate at its floor; cohort refuses.
      if (free("--warmup") && free("--total-steps") && warmup.value_or(1000) > *total)
        p.fail("warmup_num_steps",
               detail::concat("expected at most total_num_steps ", *total, ", got ",
                              warmup.value_or(1000), warmup ? "" : " (DeepSpeed's default)"));
      if (free("--total-steps")) cfg.total_steps = *total;
    }
    if (cosine) {
      const auto start = p.number("warmup_min_ratio", 0, 1, "0..1");
      if (start && *start != 0)
        p.fail("warmup_min_ratio",
               detail::concat("cohort's warm-up starts from 0: expected 0, got ", *start));
      cos_min_ratio = p.number("cos_min_ratio", 0, 1, "0..1").value_or(1e-4);
    } else {
      // WarmupDecayLR's floor is its warmup_min_lr too: 0 either way.
      const auto start = p.number("warmup_min_lr", 0, kInf, "0 or more");
      if (start && *start != 0)
        p.fail("warmup_min_lr",
               detail::concat("cohort's warm-up starts from 0: expected 0, got ", *start));
      // The scheduler's peak wins over optimizer.params.lr, as in DeepSpeed.
      const auto peak = p.positive("warmup_max_lr");
      if (peak && free("--lr")) cfg.lr = float(*peak);
      if (decay && free("--min-lr")) cfg.min_lr = 0;
    }
    p.finish();
    s.finish();
    if (free("--lr-schedule")) cfg.schedule = cosine ? "cosine" : decay ? "linear" : "constant";
    if (free("--warmup")) cfg.warmup_steps = warmup.value_or(1000);  // DeepSpeed's default
  }

  void precision(Section& root) {
    Section bf16 = root.section("bf16");
    const bool bf16_on = bf16.boolean("enabled").value_or(false);
    bf16.finish();
    Section fp16 = root.section("fp16");
    const bool fp16_on = fp16.boolean("enabled").value_or(false);
    const auto scale = fp16.number("loss_scale", 0, kInf, "0 (dynamic) or more");
    const auto power = fp16.integer("initial_scale_power", 0, 64, "0..64");
    const auto window = fp16.integer("loss_scale_window", 1, kMaxCount, "a positive integer");
    const auto hysteresis = fp16.integer("hysteresis", 1, kMaxCount, "a positive integer");
    const auto floor = fp16.positive("min_loss_scale");
    fp16.finish();
    if (bf16_on && fp16_on) root.fail("", "bf16.enabled and fp16.enabled are both true; pick one");
    auto& f = cfg.precision;
    if (free("--precision") && (bf16_on || fp16_on)) f.precision = bf16_on ? "bf16" : "fp16";
    if (fp16_on) {
      if (scale && free("--loss-scale")) f.scaling.loss_scale = float(*scale);
      if (power && free("--initial-scale-power")) f.scaling.initial_scale_power = int(*power);
      if (window && free("--loss-scale-window")) f.scaling.loss_scale_window = int(*window);
      if (hysteresis && free("--hysteresis")) f.scaling.hysteresis = int(*hysteresis);
      if (floor && free("--min-loss-scale")) f.scaling.min_loss_scale = float(*floor);
    }
    if (const auto comm = root.string("communication_data_type")) {
      if (*comm == "fp16")
        root.fail("communication_data_type", "cohort's gradients travel as fp32 or bf16, not fp16");
      if (*comm != "fp32" && *comm != "bf16")
        root.fail("communication_data_type",
                  "expected \"fp32\" or \"bf16\", got \"" + *comm + "\"");
      if (free("--grad-dtype")) f.grad_dtype = *comm;
    }
  }

  // Stage 0 is data parallelism; 1 to 3 the zero strategy. DeepSpeed counts
  // buckets in elements; cohort's --bucket-mb in MiB of fp32 gradients.
  void zero(Section& root) {
    Section z = root.section("zero_optimization");
    const auto stage = z.integer("stage", 0, 3, "0..3");
    const auto bucket = z.number("reduce_bucket_size", 1, kInf, "a positive number of elements");
    const auto gather = z.number("allgather_bucket_size", 1, kInf, "a positive number of elements");
    const auto overlap = z.boolean("overlap_comm");
    const auto contiguous = z.boolean("contiguous_gradients");
    stage3(z);
    offload(z, "offload_optimizer");
    offload(z, "offload_param");
    z.finish();
    if (bucket && free("--bucket-mb"))
      strategy_args.push_back(detail::concat("--bucket-mb ", *bucket * 4 / (1 << 20)));
    if (overlap && !*overlap && free("--no-overlap")) strategy_args.push_back("--no-overlap");
    if (gather)
      note(
          "zero_optimization.allgather_bucket_size: accepted, unused (cohort cuts no all-gather "
          "buckets)");
    if (contiguous) note("zero_optimization.contiguous_gradients: cohort's arenas are contiguous");
    if (!stage) return;
    if (!free("--parallel")) {
      note(detail::concat("zero_optimization.stage ", *stage, ": --parallel ", cfg.parallel,
                          " given"));
      return;
    }
    if (*stage == 0) {
      if (world > 1) cfg.parallel = "dp";
      return;
    }
    // The zero family declares --zero-stage; without it, its --parallel name
    // is refused by the registry's own check.
    cfg.parallel = "zero";
    if (free("--zero-stage")) strategy_args.push_back(detail::concat("--zero-stage ", *stage));
  }

  // DeepSpeed's example configs carry stage 3's tuning knobs. The prefetch
  // becomes --prefetch-mb; cohort's stage 3 gathers whole top-level layers
  // (or their leaves) and frees each after use, so the others are read,
  // checked and noted.
  void stage3(Section& z) {
    // DeepSpeed counts the prefetch in elements, --prefetch-mb in MiB of f32.
    if (const auto pf = z.number("stage3_prefetch_bucket_size", 0, kInf, "0 or more"))
      if (free("--prefetch-mb"))
        strategy_args.push_back(detail::concat("--prefetch-mb ", *pf * 4 / (1 << 20)));
    const char* how =
        "noted: cohort's stage 3 gathers whole layers, or their leaves, and frees each after use";
    for (const char* k : {"stage3_param_persistence_threshold", "stage3_max_live_parameters",
                          "stage3_max_reuse_distance"})
      if (z.number(k, 0, kInf, "0 or more")) note(detail::concat("zero_optimization.", k, ": ", how));
    if (z.boolean("stage3_gather_16bit_weights_on_model_save"))
      note(
          "zero_optimization.stage3_gather_16bit_weights_on_model_save: cohort's checkpoints "
          "always hold the whole model, gathered, in f32");
  }

  // {"device": "none"} is DeepSpeed's way of saying no offload; anything else
  // asks for memory cohort does not have apart from its own.
  void offload(Section& z, const char* key) {
    if (!z.has(key)) return;
    Section o = z.section(key);
    const auto device = o.string("device");
    if (device.value_or("") != "none")
      z.fail(key, "cohort does not offload to CPU/NVMe: it is the CPU (remove the section or "
                  "set \"device\": \"none\")");
    o.ignore_rest();  // pin_memory, nvme_path, ...: nothing without an offload
  }

  void cadence(Section& root) {
    if (const auto n = root.integer("steps_per_print", 1, kMaxCount, "a positive integer"))
      note(detail::concat("steps_per_print ", *n, ": cohort prints once per epoch"));
    if (root.boolean("wall_clock_breakdown"))
      note("wall_clock_breakdown: cohort always reports compute / communication / data time");
  }

  // The families' flags, parsed by a parser of their own (the registry's
  // members are bound to it as to the command line's).
  void set_strategy_flags() {
    CLI::App app;
    cfg.strategies->add_flags(app);
    std::string line;
    for (auto& a : strategy_args)
      if (app.get_option_no_throw(a.substr(0, a.find(' '))))
        line += (line.empty() ? "" : " ") + a;
      else
        note(a + ": no such flag in this build");
    if (!line.empty()) app.parse(line, false);
  }
};

}  // namespace

void apply_ds_config(const json& doc, const std::string& path, TrainConfig& cfg,
                     const std::set<std::string>& given, int world) {
  COHORT_INPUT_CHECK(world >= 1, "--config ", path, ": world size must be at least 1, got ", world);
  Section root(doc, "", path);
  Reader r{cfg, given, world, {}, std::nullopt};
  r.batch(root);
  r.optimizer(root);
  r.scheduler(root);  // after the optimizer: warmup_max_lr wins over params.lr
  if (const auto clip = root.number("gradient_clipping", 0, kInf, "0 (off) or more");
      clip && r.free("--clip"))
    cfg.clip_norm = float(*clip);
  r.precision(root);
  r.zero(root);
  r.cadence(root);
  root.finish();
  if (r.cos_min_ratio && r.free("--min-lr")) cfg.min_lr = cfg.lr * float(*r.cos_min_ratio);
  r.set_strategy_flags();
  cfg.config = path;
}

void apply_ds_config(const std::string& path, TrainConfig& cfg, const std::set<std::string>& given,
                     int world) {
  std::ifstream in(path);
  COHORT_INPUT_CHECK(in, "--config ", path, ": cannot open the file");
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::parse_error& e) {
    throw InputError("--config " + path + ": not JSON: " + e.what());
  }
  apply_ds_config(doc, path, cfg, given, world);
}

}  // namespace cohort
