#include "train/load_weights.h"

#include <map>
#include <set>

#include "core/error.h"
#include "train/checkpoint.h"
#include "train/hf_gpt2.h"

namespace cohort {
namespace {

bool in_head(const std::string& name, const std::string& head) {
  return !head.empty() && (name == head + ".weight" || name == head + ".bias");
}

// "a, b, c, ... (N more)": names in a one-line report.
std::string some(const std::vector<std::string>& names) {
  constexpr size_t kShown = 4;
  std::string s;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > kShown) s += ", ... " + std::to_string(names.size() - kShown) + " more";
  return s;
}

std::string counted(size_t n, const std::vector<std::string>& names) {
  return std::to_string(n) + (names.empty() ? "" : " (" + some(names) + ")");
}

}  // namespace

std::string LoadReport::line(const std::string& path) const {
  return "--load " + path + ": loaded " + std::to_string(loaded.size()) +
         " tensors, re-initialized " + counted(reinitialized.size(), reinitialized) +
         ", ignored " + counted(ignored.size(), ignored);
}

LoadReport load_weights(const std::string& path, const std::string& model_name,
                        const Arena& params, const Arena* buffers, const LoadOptions& options) {
  SafetensorsFile file = load_safetensors(path);
  // Hugging Face's GPT-2 files: same names, Conv1D layout (train/hf_gpt2.h).
  if (model_name.rfind("gpt2", 0) == 0 && is_hf_gpt2(file)) from_hf_gpt2(file, model_name);
  const std::string at = "--load " + path + ": ";
  const std::string partial_hint = " (--load-partial keeps the model's own)";
  auto model = file.metadata.find("model");
  const bool cohort_file = model != file.metadata.end();
  if (cohort_file && model->second != model_name && !options.partial)
    throw InputError(at + "the checkpoint holds model '" + one_line(model->second) + "', not '" +
                     model_name + "' (--load-partial loads the tensors that match)");

  std::map<std::string, const Tensor*> by_name;
  for (const NamedTensor& t : file.tensors) by_name[t.name] = &t.tensor;
  LoadReport report;
  std::vector<TensorCopy> copies;
  std::set<std::string> known;
  for (const Arena* arena : {&params, buffers}) {
    if (!arena) continue;
    for (size_t i = 0; i < arena->infos().size(); ++i) {
      const ParamInfo& info = arena->infos()[i];
      known.insert(info.name);
      auto it = by_name.find(info.name);
      const bool free = options.partial || in_head(info.name, options.head);
      if (it == by_name.end()) {
        if (!free && !is_batch_counter(info.name))
          throw InputError(at + "tensor '" + info.name + "' is missing" + partial_hint);
        report.reinitialized.push_back(info.name);
        continue;
      }
      if (it->second->shape() != info.shape) {
        if (!free)
          throw InputError(at + "tensor '" + info.name + "' has shape " +
                           shape_str(it->second->shape()) + ", the model's is " +
                           shape_str(info.shape) + partial_hint);
        report.reinitialized.push_back(info.name);
        continue;
      }
      if (!all_finite(*it->second))
        throw InputError(at + "tensor '" + info.name + "' holds NaN or infinite values");
      copies.push_back({arena->param(i), it->second});
      report.loaded.push_back(info.name);
    }
  }
  for (const NamedTensor& t : file.tensors) {
    if (known.count(t.name) || t.name.rfind("optimizer.", 0) == 0) continue;  // run state
    if (!cohort_file && !options.partial)
      throw InputError(at + "tensor '" + one_line(t.name) + "' is not in --model " + model_name +
                       " (--load-partial ignores it)");
    report.ignored.push_back(one_line(t.name));
  }
  apply_copies(copies);
  return report;
}

}  // namespace cohort
