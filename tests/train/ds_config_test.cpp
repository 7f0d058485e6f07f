// apply_ds_config: every DeepSpeed key onto its flag, DeepSpeed's batch
// arithmetic and its error cases, refusals in one line naming the key, and
// flags given on the command line winning over the file.
#include "train/ds_config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "support/support.h"
#include "train/trainer.h"

namespace cohort {
namespace {

using json = nlohmann::json;
using testing_support::error_of;

// The file's keys applied to a fresh config (flags `given`, `world` ranks).
TrainConfig applied(const json& doc, std::set<std::string> given = {}, int world = 1) {
  TrainConfig cfg;
  apply_ds_config(doc, "ds.json", cfg, given, world);
  return cfg;
}

std::string refusal(const json& doc, int world = 1) {
  return error_of([&] { applied(doc, {}, world); });
}

TEST(DsConfig, MapsEveryKey) {
  const json doc = json::parse(R"({
    "train_batch_size": 64, "train_micro_batch_size_per_gpu": 8,
    "gradient_accumulation_steps": 4,
    "optimizer": {"type": "adamw", "params": {"lr": 0.002, "betas": [0.8, 0.99],
                  "eps": 1e-6, "weight_decay": 0.05}},
    "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 500,
                  "warmup_num_steps": 50, "warmup_type": "linear", "cos_min_ratio": 0.1,
                  "warmup_min_ratio": 0}},
    "gradient_clipping": 0.5,
    "fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 12,
             "loss_scale_window": 200, "hysteresis": 3, "min_loss_scale": 0.25},
    "bf16": {"enabled": false},
    "communication_data_type": "bf16",
    "zero_optimization": {"stage": 0, "reduce_bucket_size": 5e7, "allgather_bucket_size": 5e8,
                          "overlap_comm": false, "contiguous_gradients": true},
    "steps_per_print": 10, "wall_clock_breakdown": true})");
  const TrainConfig c = applied(doc, {}, 2);
  EXPECT_EQ(c.batch, 8);
  EXPECT_EQ(c.accumulate, 4);
  EXPECT_EQ(c.optimizer, "adamw");
  EXPECT_FLOAT_EQ(c.lr, 0.002f);
  EXPECT_FLOAT_EQ(c.beta1, 0.8f);
  EXPECT_FLOAT_EQ(c.beta2, 0.99f);
  EXPECT_FLOAT_EQ(c.eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.weight_decay, 0.05f);
  EXPECT_EQ(c.schedule, "cosine");
  EXPECT_EQ(c.warmup_steps, 50);
  EXPECT_EQ(c.total_steps, 500);
  EXPECT_FLOAT_EQ(c.min_lr, 0.0002f);
  EXPECT_FLOAT_EQ(c.clip_norm, 0.5f);
  EXPECT_EQ(c.precision.precision, "fp16");
  EXPECT_EQ(c.precision.grad_dtype, "bf16");
  EXPECT_EQ(c.precision.scaling.loss_scale, 0);
  EXPECT_EQ(c.precision.scaling.initial_scale_power, 12);
  EXPECT_EQ(c.precision.scaling.loss_scale_window, 200);
  EXPECT_EQ(c.precision.scaling.hysteresis, 3);
  EXPECT_FLOAT_EQ(c.precision.scaling.min_loss_scale, 0.25f);
  EXPECT_EQ(c.parallel, "dp");  // stage 0 on 2 ranks
  // 5e7 elements of 4 bytes: 190.73 MiB; overlap_comm false: --no-overlap.
  const std::string flags = c.strategies->describe();
  EXPECT_NE(flags.find("--bucket-mb 190.73"), std::string::npos) << flags;
  EXPECT_NE(flags.find("--no-overlap 1"), std::string::npos) << flags;
  EXPECT_EQ(c.config, "ds.json");
  ASSERT_EQ(c.config_notes.size(), 4u);  // allgather, contiguous, steps_per_print, wall clock
  EXPECT_NE(c.config_notes[2].find("steps_per_print 10"), std::string::npos);
}

TEST(DsConfig, OptimizerAsDeepSpeedBuildsIt) {
  auto opt = [](const char* params, const char* type = "Adam") {
    return applied(json::parse(std::string(R"({"optimizer": {"type": ")") + type +
                               R"(", "params": )" + params + "}}"));
  };
  // DeepSpeed's Adam is AdamW unless adam_w_mode is false; without weight
  // decay the two are the same update, named adam.
  EXPECT_EQ(opt(R"({"weight_decay": 0.1})").optimizer, "adamw");
  EXPECT_EQ(opt(R"({"weight_decay": 0.1, "adam_w_mode": false})").optimizer, "adam");
  EXPECT_EQ(opt(R"({"lr": 0.01})").optimizer, "adam");
  EXPECT_FLOAT_EQ(opt(R"({})").eps, 1e-8f);  // DeepSpeed's default, not cohort's 1e-7
  EXPECT_EQ(opt(R"({"lr": 0.1})", "SGD").optimizer, "sgd");
  EXPECT_FLOAT_EQ(opt(R"({"lr": 0.1})", "SGD").momentum, 0.0f);  // torch's default
  EXPECT_FLOAT_EQ(opt(R"({"momentum": 0.5})", "sgd").momentum, 0.5f);
}

TEST(DsConfig, WarmupLRIsConstantAfterALinearWarmup) {
  const TrainConfig c = applied(json::parse(R"({
    "optimizer": {"type": "Adam", "params": {"lr": 0.01}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 0.003,
                  "warmup_type": "linear"}}})"));
  EXPECT_EQ(c.schedule, "constant");
  EXPECT_EQ(c.warmup_steps, 1000);  // DeepSpeed's default
  EXPECT_FLOAT_EQ(c.lr, 0.003f);    // the scheduler's peak wins, as in DeepSpeed
}

// train_batch_size = micro x accumulation x world: any two give the third.
TEST(DsConfig, BatchArithmetic) {
  struct Case {
    const char* doc;
    int world;
    int64_t batch;
    int accumulate;
  };
  for (const Case& k : std::vector<Case>{
           {R"({"train_batch_size": 128, "train_micro_batch_size_per_gpu": 16})", 1, 16, 8},
           {R"({"train_batch_size": 128, "train_micro_batch_size_per_gpu": 16})", 2, 16, 4},
           {R"({"train_batch_size": 128, "gradient_accumulation_steps": 2})", 4, 16, 2},
           {R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 3})", 2, 8, 3},
           {R"({"train_batch_size": 96})", 3, 32, 1},
           {R"({"train_micro_batch_size_per_gpu": 8})", 2, 8, 1},
           {R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8,
                "gradient_accumulation_steps": 2})",
            4, 8, 2}}) {
    const TrainConfig c = applied(json::parse(k.doc), {}, k.world);
    EXPECT_EQ(c.batch, k.batch) << k.doc << " world " << k.world;
    EXPECT_EQ(c.accumulate, k.accumulate) << k.doc << " world " << k.world;
  }
}

TEST(DsConfig, BatchErrorsAsDeepSpeed) {
  EXPECT_EQ(refusal(json::parse(R"({"train_batch_size": 100, "train_micro_batch_size_per_gpu": 16,
                                   "gradient_accumulation_steps": 2})"),
                    2),
            "--config ds.json: train_batch_size 100 != train_micro_batch_size_per_gpu 16 * "
            "gradient_accumulation_steps 2 * world size 2 (= 64)");
  EXPECT_EQ(
      refusal(json::parse(R"({"train_batch_size": 128, "train_micro_batch_size_per_gpu": 16})"), 3),
      "--config ds.json: train_batch_size 128 is not divisible by "
      "train_micro_batch_size_per_gpu 16 * world size 3");
  EXPECT_EQ(refusal(json::parse(R"({"train_batch_size": 100, "gradient_accumulation_steps": 3})")),
            "--config ds.json: train_batch_size 100 is not divisible by "
            "gradient_accumulation_steps 3 * world size 1");
  EXPECT_EQ(refusal(json::parse(R"({"train_batch_size": 7})"), 2),
            "--config ds.json: train_batch_size 7 is not divisible by world size 2");
  EXPECT_EQ(refusal(json::parse(R"({"train_micro_batch_size_per_gpu": 0})")),
            "--config ds.json: train_micro_batch_size_per_gpu: expected a positive integer, got 0");
}

TEST(DsConfig, RefusesUnknownKeysWrongTypesAndBadValuesNamingTheKey) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"({"zero_optimization": {"stage": 7}})",
       "--config ds.json: zero_optimization.stage: expected 0..3, got 7"},
      {R"({"train_batch_size": "auto"})",
       "--config ds.json: train_batch_size: expected an integer, got \"auto\""},
      {R"({"train_batch_size": 12.5})",
       "--config ds.json: train_batch_size: expected an integer, got 12.5"},
      {R"({"bf16": {"enabled": "yes"}})",
       "--config ds.json: bf16.enabled: expected true or false, got \"yes\""},
      {R"({"fp16": {"enabled": true, "hysteresis": 0}})",
       "--config ds.json: fp16.hysteresis: expected a positive integer, got 0"},
      {R"({"gradient_clipping": -1})",
       "--config ds.json: gradient_clipping: expected 0 (off) or more, got -1"},
      {R"({"optimizer": {"type": "Lamb"}})",
       "--config ds.json: optimizer.type: cohort has no 'Lamb' (valid: Adam, AdamW, SGD)"},
      {R"({"optimizer": {"type": "Adam", "params": {"betas": [0.9]}}})",
       "--config ds.json: optimizer.params.betas: expected [beta1, beta2], got [0.9]"},
      {R"({"optimizer": {"type": "SGD", "params": {"betas": [0.9, 0.99]}}})",
       "--config ds.json: optimizer.params.betas: an Adam parameter, not SGD's"},
      {R"({"zero_optimization": []})",
       "--config ds.json: zero_optimization: expected an object, got []"},
      {R"({"communication_data_type": "fp16"})",
       "--config ds.json: communication_data_type: cohort's gradients travel as fp32 or bf16, "
       "not fp16"},
      {R"({"bf16": {"enabled": true}, "fp16": {"enabled": true}})",
       "--config ds.json: bf16.enabled and fp16.enabled are both true; pick one"},
  };
  for (auto& [doc, message] : cases) EXPECT_EQ(refusal(json::parse(doc)), message) << doc;
  // Unknown keys, at the top and inside a section, with the keys it reads.
  EXPECT_NE(refusal(json::parse(R"({"prescale_gradients": false})"))
                .find("--config ds.json: prescale_gradients: not a key cohort reads here (valid: "
                      "train_batch_size,"),
            std::string::npos);
  EXPECT_NE(refusal(json::parse(R"({"zero_optimization": {"stage": 0, "cpu_offload": false}})"))
                .find("--config ds.json: zero_optimization.cpu_offload: not a key"),
            std::string::npos);
  EXPECT_EQ(error_of([] {
              TrainConfig c;
              apply_ds_config("/nonexistent/ds.json", c, {}, 1);
            }),
            "--config /nonexistent/ds.json: cannot open the file");
}

TEST(DsConfig, RefusesSchedulesCohortCannotRun) {
  auto sched = [](const char* type, const char* params) {
    return refusal(json::parse(std::string(R"({"scheduler": {"type": ")") + type +
                               R"(", "params": )" + params + "}}"));
  };
  EXPECT_NE(sched("WarmupDecayLR", R"({"total_num_steps": 10})")
                .find("--config ds.json: scheduler.type: WarmupDecayLR decays linearly"),
            std::string::npos);
  EXPECT_NE(sched("OneCycle", "{}").find("scheduler.type: cohort has no 'OneCycle'"),
            std::string::npos);
  // DeepSpeed's default warm-up is logarithmic.
  EXPECT_NE(sched("WarmupLR", R"({"warmup_num_steps": 10})")
                .find("scheduler.params.warmup_type: absent means DeepSpeed's log warm-up"),
            std::string::npos);
  EXPECT_NE(
      sched("WarmupLR", R"({"warmup_type": "log"})").find("scheduler.params.warmup_type: 'log'"),
      std::string::npos);
  EXPECT_NE(sched("WarmupLR", R"({"warmup_type": "linear", "warmup_min_lr": 0.0001})")
                .find("scheduler.params.warmup_min_lr: cohort's warm-up starts from 0"),
            std::string::npos);
  EXPECT_NE(sched("WarmupCosineLR", R"({"warmup_type": "linear"})")
                .find("scheduler.params.total_num_steps: missing"),
            std::string::npos);
}

TEST(DsConfig, FlagsGivenOnTheCommandLineWin) {
  const json doc = json::parse(R"({
    "train_batch_size": 128, "train_micro_batch_size_per_gpu": 16,
    "gradient_accumulation_steps": 8,
    "optimizer": {"type": "Adam", "params": {"lr": 0.001, "weight_decay": 0.1}},
    "bf16": {"enabled": true}, "gradient_clipping": 1.0,
    "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e8}})");
  TrainConfig c;
  c.batch = 32;  // as CLI11 set them
  c.lr = 0.5f;
  c.precision.precision = "fp32";
  c.parallel = "none";
  apply_ds_config(doc, "ds.json", c,
                  {"--batch", "--lr", "--precision", "--parallel", "--bucket-mb"}, 1);
  EXPECT_EQ(c.batch, 32);
  EXPECT_EQ(c.accumulate, 4);  // the file's 128 stands: 128 / 32
  EXPECT_FLOAT_EQ(c.lr, 0.5f);
  EXPECT_EQ(c.precision.precision, "fp32");
  EXPECT_EQ(c.parallel, "none");
  EXPECT_NE(c.strategies->describe().find("--bucket-mb 25\n"), std::string::npos);
  EXPECT_FLOAT_EQ(c.clip_norm, 1.0f);  // not given: the file's
  EXPECT_EQ(c.optimizer, "adamw");
  // --batch and --accumulate together: the file's train_batch_size gives way.
  TrainConfig both;
  both.batch = 4;
  both.accumulate = 3;
  apply_ds_config(doc, "ds.json", both, {"--batch", "--accumulate", "--parallel"}, 1);
  EXPECT_EQ(both.batch, 4);
  EXPECT_EQ(both.accumulate, 3);
  // --batch against a global batch it does not divide: refused, naming both.
  EXPECT_EQ(error_of([&] {
              TrainConfig odd;
              odd.batch = 48;
              apply_ds_config(doc, "ds.json", odd, {"--batch"}, 1);
            }),
            "--config ds.json: train_batch_size 128 is not divisible by --batch 48 * world size 1");
}

// Stages 1 to 3 are the zero strategy's: where this build has none, the
// registry's own check refuses it by --parallel.
TEST(DsConfig, ZeroStagesAskForTheZeroStrategy) {
  const TrainConfig c = applied(json::parse(R"({"zero_optimization": {"stage": 2}})"), {}, 2);
  EXPECT_EQ(c.parallel, "zero");
  bool zero_registered = true;
  try {
    c.strategies->find("zero");
  } catch (const InputError&) {
    zero_registered = false;
  }
  if (!zero_registered)
    EXPECT_NE(error_of([&] { check_config(c, 2); }).find("--parallel: unknown strategy 'zero'"),
              std::string::npos);
  EXPECT_EQ(applied(json::parse(R"({"zero_optimization": {"stage": 0}})"), {}, 1).parallel, "none");
}

TEST(DsConfig, TheExampleFileReads) {
  TrainConfig c;
  apply_ds_config(std::string(COHORT_SOURCE_DIR) + "/configs/ds_config_example.json", c, {}, 2);
  EXPECT_EQ(c.batch, 16);
  EXPECT_EQ(c.accumulate, 4);
  EXPECT_EQ(c.optimizer, "adamw");
  EXPECT_FLOAT_EQ(c.beta1, 0.8f);
  EXPECT_EQ(c.precision.precision, "bf16");
  EXPECT_EQ(c.schedule, "constant");
  EXPECT_EQ(c.warmup_steps, 1000);
  EXPECT_EQ(c.parallel, "dp");
}

}  // namespace
}  // namespace cohort
