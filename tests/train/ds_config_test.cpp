// apply_ds_config: every DeepSpeed key onto its flag, DeepSpeed's batch
// arithmetic and its error cases, refusals in one line naming the key, and
// flags given on the command line winning over the file.
#include "train/ds_config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "optim/schedule.h"
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

// WarmupDecayLR: linear warm-up to warmup_max_lr, then linear decay to 0 at
// total_num_steps (cohort's "linear" schedule).
TEST(DsConfig, WarmupDecayLRDecaysLinearlyToZero) {
  const TrainConfig c = applied(json::parse(R"({
    "optimizer": {"type": "Adam", "params": {"lr": 0.01}},
    "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 0.002,
                  "warmup_num_steps": 20, "total_num_steps": 300, "warmup_type": "linear",
                  "last_batch_iteration": -1}}})"));
  EXPECT_EQ(c.schedule, "linear");
  EXPECT_EQ(c.warmup_steps, 20);
  EXPECT_EQ(c.total_steps, 300);
  EXPECT_FLOAT_EQ(c.lr, 0.002f);
  EXPECT_FLOAT_EQ(c.min_lr, 0.0f);
  // The schedule the trainer builds from it.
  const auto s = make_schedule(c.schedule, {.lr = c.lr, .warmup_steps = c.warmup_steps,
                                            .total_steps = c.total_steps, .min_lr = c.min_lr});
  EXPECT_FLOAT_EQ(s->lr(20), 0.002f);
  EXPECT_FLOAT_EQ(s->lr(160), 0.001f);
  EXPECT_FLOAT_EQ(s->lr(300), 0.0f);
}

TEST(DsConfig, RefusesSchedulesCohortCannotRun) {
  auto sched = [](const char* type, const char* params) {
    return refusal(json::parse(std::string(R"({"scheduler": {"type": ")") + type +
                               R"(", "params": )" + params + "}}"));
  };
  EXPECT_NE(sched("WarmupDecayLR", R"({"warmup_type": "linear"})")
                .find("--config ds.json: scheduler.params.total_num_steps: missing "
                      "(WarmupDecayLR needs it)"),
            std::string::npos);
  // DeepSpeed's default 1000 warm-up steps against 500 in all.
  EXPECT_EQ(sched("WarmupDecayLR", R"({"warmup_type": "linear", "total_num_steps": 500})"),
            "--config ds.json: scheduler.params.warmup_num_steps: expected at most "
            "total_num_steps 500, got 1000 (DeepSpeed's default)");
  EXPECT_NE(sched("WarmupDecayLR",
                  R"({"warmup_type": "linear", "total_num_steps": 50, "warmup_num_steps": 5,
                     "warmup_min_lr": 1e-5})")
                .find("scheduler.params.warmup_min_lr: cohort's warm-up starts from 0"),
            std::string::npos);
  EXPECT_NE(sched("WarmupLR", R"({"warmup_type": "linear", "last_batch_iteration": 7})")
                .find("scheduler.params.last_batch_iteration: cohort resumes a schedule with "
                      "--resume"),
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
  // Stage 3 asks for --zero-stage 3, which the zero family checks itself.
  const TrainConfig three = applied(json::parse(R"({"zero_optimization": {"stage": 3}})"), {}, 2);
  EXPECT_EQ(three.parallel, "zero");
  if (zero_registered)
    EXPECT_NE(three.strategies->describe().find("--zero-stage 3\n"), std::string::npos)
        << three.strategies->describe();
}

// DeepSpeed's stage-3 knobs are read, checked and noted; offloading is refused.
TEST(DsConfig, Stage3KnobsAreNotedAndOffloadIsRefused) {
  const TrainConfig c = applied(json::parse(R"({"zero_optimization": {"stage": 3,
    "stage3_prefetch_bucket_size": 5e8, "stage3_param_persistence_threshold": 1e6,
    "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9,
    "stage3_gather_16bit_weights_on_model_save": true,
    "offload_param": {"device": "none"}, "offload_optimizer": {"device": "none",
                                                              "pin_memory": true}}})"),
                                {}, 2);
  ASSERT_EQ(c.config_notes.size(), 5u);
  EXPECT_NE(c.config_notes[0].find("stage3_prefetch_bucket_size: noted: cohort's stage 3 gathers "
                                   "whole layers one layer ahead"),
            std::string::npos)
      << c.config_notes[0];
  EXPECT_NE(c.config_notes[4].find("stage3_gather_16bit_weights_on_model_save"), std::string::npos);
  for (const char* key : {"offload_optimizer", "offload_param"}) {
    const std::string doc = std::string(R"({"zero_optimization": {"stage": 3, ")") + key +
                            R"(": {"device": "cpu", "pin_memory": true}}})";
    EXPECT_EQ(refusal(json::parse(doc), 2),
              std::string("--config ds.json: zero_optimization.") + key +
                  ": cohort does not offload to CPU/NVMe: it is the CPU (remove the section or "
                  "set \"device\": \"none\")");
  }
  EXPECT_EQ(refusal(json::parse(R"({"zero_optimization": {"stage3_max_live_parameters": "1e9"}})")),
            "--config ds.json: zero_optimization.stage3_max_live_parameters: expected a number, "
            "got \"1e9\"");
  EXPECT_NE(refusal(json::parse(R"({"zero_optimization": {"offload_param": {"device": "nvme"}}})"))
                .find("zero_optimization.offload_param: cohort does not offload"),
            std::string::npos);
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

// gpt2 + Adam + WarmupCosineLR + ZeRO stage 3, as DeepSpeed's examples write it.
TEST(DsConfig, TheZero3ExampleFileReads) {
  TrainConfig c;
  apply_ds_config(std::string(COHORT_SOURCE_DIR) + "/configs/ds_config_zero3.json", c, {}, 2);
  EXPECT_EQ(c.batch, 2);
  EXPECT_EQ(c.accumulate, 2);
  EXPECT_EQ(c.optimizer, "adamw");
  EXPECT_FLOAT_EQ(c.beta2, 0.95f);
  EXPECT_EQ(c.schedule, "cosine");
  EXPECT_EQ(c.warmup_steps, 100);
  EXPECT_EQ(c.total_steps, 1000);
  EXPECT_FLOAT_EQ(c.min_lr, 6e-5f);
  EXPECT_FLOAT_EQ(c.clip_norm, 1.0f);
  EXPECT_EQ(c.precision.precision, "bf16");
  EXPECT_EQ(c.parallel, "zero");
}

}  // namespace
}  // namespace cohort
