#include "train/trainer.h"

#include <omp.h>

#include <algorithm>

#include "core/clock.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/prefetch.h"
#include "data/sampler.h"
#include "nn/models/zoo.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/report.h"
#include "parallel/local.h"

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

static void check_config(const TrainConfig& c) {
  COHORT_INPUT_CHECK(c.epochs >= 1, "--epochs must be at least 1, got ", c.epochs);
  COHORT_INPUT_CHECK(c.batch >= 1, "--batch must be at least 1, got ", c.batch);
  COHORT_INPUT_CHECK(c.lr > 0, "--lr must be positive, got ", c.lr);
  COHORT_INPUT_CHECK(c.threads >= 0, "--threads must be 0 (all) or more, got ", c.threads);
  COHORT_INPUT_CHECK(c.repeat >= 1, "--repeat must be at least 1, got ", c.repeat);
}

nlohmann::ordered_json train(const TrainConfig& cfg) {
  check_config(cfg);
  Report report(cfg.log);
  if (cfg.threads > 0) omp_set_num_threads(cfg.threads);
  auto model = nn::make_model(cfg.model, cfg.seed);
  DataSplit data = load_dataset(cfg.data, cfg.data_dir, cfg.limit);
  const Shape& in = model->input_shape();
  const Shape img(data.train.images.shape().begin() + 1, data.train.images.shape().end());
  COHORT_INPUT_CHECK(img == in, "--model ", cfg.model, " takes ", shape_str(in),
                     " images (HWC) but --data ", cfg.data, " has ", shape_str(img));
  if (!cfg.load.empty())
    load_checkpoint(cfg.load, model->name(), model->params(), &model->buffers());

  auto opt = make_optimizer(cfg.optimizer, cfg.weight_decay, cfg.momentum);
  Sampler sampler(data.train.size(), 0, 1, cfg.repeat, cfg.seed, true);
  const int64_t steps_per_epoch = sampler.size() / cfg.batch + (sampler.size() % cfg.batch != 0);
  ScheduleOptions so;
  so.lr = cfg.lr;
  so.warmup_steps = cfg.warmup_steps;
  so.total_steps = steps_per_epoch * cfg.epochs;
  so.step_size = steps_per_epoch;
  auto schedule = make_schedule(cfg.schedule, so);
  LocalStep step(*model, *opt, cfg.seed, cfg.clip_norm);

  report.start({{"model", cfg.model}, {"parameters", model->num_params()}, {"data", cfg.data},
                {"train_images", sampler.size()}, {"test_images", data.test.size()},
                {"batch", cfg.batch}, {"threads", omp_get_max_threads()}, {"world_size", 1}});

  std::vector<double> epoch_seconds;
  double total_images = 0, total_seconds = 0, compute_s = 0, data_s = 0;
  int64_t global_step = 0, total_steps = 0;
  EvalResult eval;
  for (int epoch = 1; epoch <= cfg.epochs; ++epoch) {
    Prefetcher prefetch(data.train, sampler.epoch_indices(epoch - 1), cfg.batch, false);
    Timer epoch_timer;
    double loss_sum = 0;
    int64_t correct = 0, seen = 0, i = 0;
    Batch batch;
    while (true) {
      Timer t;
      if (!prefetch.next(batch)) break;
      data_s += t.seconds();
      t.reset();
      StepResult r = step.run(batch, schedule->lr(global_step++));
      compute_s += t.seconds();
      loss_sum += r.loss_sum;
      correct += r.correct;
      seen += r.images;
      ++i;
      const double el = epoch_timer.seconds();
      report.progress(epoch, i, prefetch.num_batches(), loss_sum / seen, seen / el,
                      el / i * (prefetch.num_batches() - i));
    }
    const double secs = epoch_timer.seconds();
    total_steps += i;
    epoch_seconds.push_back(secs);
    total_images += double(seen);
    total_seconds += secs;
    eval = evaluate(*model, data.test, 256);
    report.epoch({{"epoch", epoch}, {"train_loss", loss_sum / seen},
                  {"train_accuracy", double(correct) / seen}, {"test_loss", eval.loss},
                  {"test_accuracy", eval.accuracy}, {"seconds", secs},
                  {"images_per_second", seen / secs}});
    if (!cfg.save.empty())
      save_checkpoint(cfg.save, model->name(), model->params(), &model->buffers(),
                      {{"epoch", std::to_string(epoch)}, {"dataset", cfg.data}});
  }
  const double n = double(std::max<int64_t>(total_steps, 1));
  nlohmann::ordered_json summary = {
      {"model", cfg.model},
      {"parameters", model->num_params()},
      {"world_size", 1},
      {"batch", cfg.batch},
      {"global_batch", cfg.batch},
      {"threads", omp_get_max_threads()},
      {"test_accuracy", eval.accuracy},
      {"test_loss", eval.loss},
      {"per_class_accuracy", eval.per_class_accuracy},
      {"epoch_seconds", epoch_seconds},
      {"images_per_second", total_images / total_seconds},
      {"step_seconds",
       {{"total", (compute_s + data_s) / n}, {"compute", compute_s / n},
        {"communication", 0.0}, {"data", data_s / n}}}};
  report.summary(summary, class_names(cfg.data));
  return summary;
}

}  // namespace cohort
