#include "train/report.h"

#include <unistd.h>

#include <sstream>

#include "core/error.h"

namespace cohort {

Report::Report(std::string mode, bool enabled, FILE* out)
    : jsonl_(mode == "jsonl"), enabled_(enabled), out_(out) {
  COHORT_INPUT_CHECK(mode == "human" || mode == "jsonl", "--log: unknown format '", mode,
                     "' (valid: human, jsonl)");
  tty_ = isatty(fileno(stderr));
}

void Report::start(const nlohmann::ordered_json& info) {
  if (!enabled_) return;
  if (jsonl_) {
    nlohmann::ordered_json j = {{"event", "start"}};
    j.update(info);
    std::fprintf(out_, "%s\n", j.dump().c_str());
  } else {
    std::fprintf(out_, "cohort train: model %s (%lld parameters), %s: %lld train / %lld test images, "
                 "batch %lld, %d thread(s), %d rank(s), global batch %lld, %s%s\n",
                 info["model"].get<std::string>().c_str(), info["parameters"].get<long long>(),
                 info["data"].get<std::string>().c_str(), info["train_images"].get<long long>(),
                 info["test_images"].get<long long>(), info["batch"].get<long long>(),
                 info["threads"].get<int>(), info.value("world_size", 1),
                 info.value("global_batch", 0LL), info.value("precision", "fp32").c_str(),
                 info.value("bf16_kernels", "") == "f32 on bf16 storage"
                     ? " (f32 kernels on bf16 storage: oneDNN has no bf16 kernel on this CPU)"
                     : "");
  }
  std::fflush(out_);
}

void Report::progress(int epoch, int64_t step, int64_t steps, double loss, double images_per_s,
                      double eta_s) {
  if (!enabled_ || jsonl_ || !tty_) return;
  const int width = 30;
  const int filled = steps ? int(width * step / steps) : width;
  std::string bar(size_t(filled), '#');
  bar.resize(size_t(width), '.');
  std::fprintf(stderr, "\repoch %d [%s] %lld/%lld loss %.4f  %.0f img/s  ETA %.0fs   ", epoch,
               bar.c_str(), (long long)step, (long long)steps, loss, images_per_s, eta_s);
  if (step == steps) std::fprintf(stderr, "\r%*s\r", 100, "");
  std::fflush(stderr);
}

void Report::epoch(const nlohmann::ordered_json& e) {
  if (!enabled_) return;
  if (jsonl_) {
    nlohmann::ordered_json j = {{"event", "epoch"}};
    j.update(e);
    std::fprintf(out_, "%s\n", j.dump().c_str());
  } else {
    char test[96] = "";
    if (e.contains("test_perplexity"))
      std::snprintf(test, sizeof test, ", test loss %.4f (perplexity %.2f), test acc %.4f",
                    e["test_loss"].get<double>(), e["test_perplexity"].get<double>(),
                    e["test_accuracy"].get<double>());
    else if (e.contains("test_accuracy"))
      std::snprintf(test, sizeof test, ", test loss %.4f, test acc %.4f",
                    e["test_loss"].get<double>(), e["test_accuracy"].get<double>());
    std::fprintf(out_, "epoch %d: train loss %.4f, train acc %.4f%s, %.2f s, %.0f images/s\n",
                 e["epoch"].get<int>(), e["train_loss"].get<double>(),
                 e["train_accuracy"].get<double>(), test, e["seconds"].get<double>(),
                 e["images_per_second"].get<double>());
    if (e.contains("tokens_per_second"))
      std::fprintf(out_, "         %.0f tokens/s, train perplexity %.2f\n",
                   e["tokens_per_second"].get<double>(), e["train_perplexity"].get<double>());
  }
  std::fflush(out_);
}

namespace {

// The effective configuration (TrainConfig::effective) in one line.
std::string config_line(const nlohmann::ordered_json& c) {
  std::ostringstream os;
  os << "config: batch " << c["batch"].get<int64_t>() << " x accumulate "
     << c["accumulate"].get<int64_t>() << " (global " << c["global_batch"].get<int64_t>() << "), "
     << c["optimizer"].get<std::string>() << " lr " << c["lr"].get<double>();
  if (c.contains("betas"))
    os << " betas " << c["betas"][0].get<double>() << "," << c["betas"][1].get<double>()
       << " eps " << c["eps"].get<double>();
  if (c.contains("momentum")) os << " momentum " << c["momentum"].get<double>();
  os << " wd " << c["weight_decay"].get<double>() << ", " << c["lr_schedule"].get<std::string>()
     << " schedule, warm-up " << c["warmup"].get<int64_t>();
  if (c.contains("total_steps"))
    os << ", " << c["total_steps"].get<int64_t>() << " steps to " << c["min_lr"].get<double>();
  os << ", clip " << c["clip"].get<double>() << ", " << c["precision"].get<std::string>()
     << " (gradients " << c["grad_dtype"].get<std::string>() << "), parallel "
     << c["parallel"].get<std::string>();
  if (!c["file"].get<std::string>().empty()) os << ", from " << c["file"].get<std::string>();
  for (size_t i = 0; i < c["notes"].size(); ++i)
    os << (i ? "; " : "; noted: ") << c["notes"][i].get<std::string>();
  return os.str();
}

}  // namespace

void Report::summary(const nlohmann::ordered_json& s, const std::vector<std::string>& class_names,
                     const std::string& strategy_text) {
  if (!enabled_) return;
  if (jsonl_) {
    nlohmann::ordered_json j = {{"event", "summary"}};
    j.update(s);
    std::fprintf(out_, "%s\n", j.dump().c_str());
  } else {
    std::fprintf(out_, "test accuracy %.4f, %.0f images/s on average\n",
                 s["test_accuracy"].get<double>(), s["images_per_second"].get<double>());
    if (s.contains("step_seconds")) {
      auto& t = s["step_seconds"];
      std::fprintf(out_, "step time %.2f ms: compute %.2f ms, communication wait %.2f ms, "
                   "data wait %.2f ms\n",
                   1e3 * t["total"].get<double>(), 1e3 * t["compute"].get<double>(),
                   1e3 * t["communication"].get<double>(), 1e3 * t["data"].get<double>());
    }
    if (s.contains("loss_scale")) {
      auto& l = s["loss_scale"];
      std::fprintf(out_, "fp16 loss scale %g (%s), %lld of %lld steps skipped on overflow\n",
                   l["scale"].get<double>(), l["dynamic"].get<bool>() ? "dynamic" : "fixed",
                   (long long)l["skipped"].get<int64_t>(), (long long)l["steps"].get<int64_t>());
    }
    if (s.contains("config")) std::fprintf(out_, "%s\n", config_line(s["config"]).c_str());
    std::fputs(strategy_text.c_str(), out_);
    auto& pc = s["per_class_accuracy"];
    // A vocabulary is no list of classes: no table of 50,257 lines.
    if (pc.size() <= 100) std::fprintf(out_, "accuracy per class:\n");
    for (size_t c = 0; c < pc.size() && pc.size() <= 100; ++c)
      std::fprintf(out_, "  %-12s %.4f\n",
                   c < class_names.size() ? class_names[c].c_str() : std::to_string(c).c_str(),
                   pc[c].get<double>());
  }
  std::fflush(out_);
}

}  // namespace cohort
