// `cohort train --load FILE`: a new run's weights from a safetensors file —
// a cohort checkpoint, Hugging Face's GPT-2, or a torchvision state dict
// (transfer learning: torchvision.models.resnet50(...).state_dict() saved
// with safetensors). Every model tensor whose name and shape match the file's
// is loaded; the classifier head (ModelSpec::head), where the file's has
// another shape (1000 ImageNet classes against --num-classes 10) or is
// absent, keeps its fresh initialization. Anything else that differs is an
// InputError naming the first such tensor, unless `partial` (--load-partial).
#pragma once
#include <string>
#include <vector>

#include "core/arena.h"

namespace cohort {

struct LoadOptions {
  std::string head;      // the classifier's prefix ("fc"); "" for none
  bool partial = false;  // --load-partial
};

struct LoadReport {
  std::vector<std::string> loaded;
  std::vector<std::string> reinitialized;  // kept the model's own initialization
  std::vector<std::string> ignored;        // in the file, not in the model
  // "--load F: loaded 320 tensors, re-initialized 2 (fc.weight, fc.bias), ignored 0"
  std::string line(const std::string& path) const;
};

// Validates the whole file before the first copy: an InputError (naming the
// path and the first offending tensor) changes nothing. Rules:
//  - cohort's "model" metadata, where present, must name `model_name`;
//  - a model tensor absent from the file, or of another shape, is refused —
//    except the head's, re-initialized (and batch counters, left at 0);
//  - a file tensor the model lacks is refused in a foreign file, ignored in
//    a cohort checkpoint (its optimizer state and run position);
//  - partial: every refusal above but non-finite values becomes
//    re-initialized (model tensors) or ignored (file tensors).
LoadReport load_weights(const std::string& path, const std::string& model_name,
                        const Arena& params, const Arena* buffers, const LoadOptions& options);

}  // namespace cohort
