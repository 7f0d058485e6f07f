#include "train/config.h"

#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "data/dataset.h"

#include "nn/models/zoo.h"

namespace cohort {

RunSettings TrainConfig::run_settings() const {
  RunSettings r;
  r.model = nn::with_classes(nn::find_model(model, seq, vocab), num_classes);
  // Models that take any image size (adaptive pooling) take the data set's.
  if (const Shape img = dataset_image_shape(data); r.model->with_image && img.size() == 3)
    r.model = nn::with_image(r.model, img[0], img[1], "--data " + data);
  r.batch = batch;
  r.accumulate = accumulate;
  r.clip_norm = clip_norm;
  r.seed = seed;
  r.precision = precision.resolve();
  strategies->export_flags(r);
  return r;
}

std::string TrainConfig::describe() const {
  std::ostringstream os;
  os << "--model " << model << "\n--seq " << seq << "\n--vocab " << vocab << "\n--data " << data
     << "\n--data-dir " << data_dir << "\n--data-path " << data_path
     << "\n--epochs " << epochs << "\n--batch " << batch << "\n--lr " << lr << "\n--optimizer "
     << optimizer << "\n--momentum " << momentum << "\n--weight-decay " << weight_decay
     << "\n--adam-beta1 " << beta1 << "\n--adam-beta2 " << beta2 << "\n--adam-eps " << eps
     << "\n--lr-schedule " << schedule << "\n--warmup " << warmup_steps << "\n--total-steps "
     << total_steps << "\n--min-lr " << min_lr << "\n--clip " << clip_norm
     << "\n--seed " << seed << "\n--repeat " << repeat << "\n--limit " << limit << "\n--eval "
     << eval << "\n--parallel " << parallel << "\n--accumulate " << accumulate << "\n--timeout "
     << timeout << "\n--memory-check " << memory_check << "\n--config " << config << "\n--load " << load << "\n--num-classes " << num_classes << "\n--load-partial " << load_partial << "\n--resume " << resume << "\n--save " << save
     << "\n--commit-every " << commit_every << "\n--checkpoint-dir " << checkpoint_dir
     << "\n--global-batch " << global_batch << "\n--stop-after-steps " << stop_after_steps
     << "\n--timeline " << timeline << "\n"
     << precision.describe() << strategies->describe();
  return os.str();
}

namespace {

// A float flag as the user wrote it (0.001, not 0.0010000000474974513).
double shown(float x) { return std::stod(detail::concat(std::setprecision(7), x)); }

}  // namespace

nlohmann::ordered_json TrainConfig::effective(int64_t global_batch) const {
  nlohmann::ordered_json j = {{"file", config},
                              {"batch", batch},
                              {"accumulate", accumulate},
                              {"global_batch", global_batch},
                              {"optimizer", optimizer},
                              {"lr", shown(lr)},
                              {"weight_decay", shown(weight_decay)}};
  if (optimizer == "sgd")
    j["momentum"] = shown(momentum);
  else
    j.update({{"betas", {shown(beta1), shown(beta2)}}, {"eps", shown(eps)}});
  j.update({{"lr_schedule", schedule}, {"warmup", warmup_steps}});
  if (schedule == "cosine" || schedule == "linear") j.update({{"total_steps", total_steps}, {"min_lr", shown(min_lr)}});
  j.update({{"clip", shown(clip_norm)}, {"precision", precision.precision},
            {"grad_dtype", precision.grad_dtype}});
  if (precision.precision == "fp16") {
    const auto& s = precision.scaling;
    j.update({{"loss_scale", shown(s.loss_scale)}, {"initial_scale_power", s.initial_scale_power},
              {"loss_scale_window", s.loss_scale_window}, {"hysteresis", s.hysteresis},
              {"min_loss_scale", shown(s.min_loss_scale)}});
  }
  j.update({{"parallel", parallel}, {"notes", config_notes}});
  return j;
}

}  // namespace cohort
