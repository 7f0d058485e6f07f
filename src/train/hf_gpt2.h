// Hugging Face GPT-2 checkpoints (model.safetensors of GPT2Model/GPT2LMHeadModel):
// the same parameter names as cohort's GPT-2, but the four projections
// (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) are Conv1D weights, laid
// out {in, out} where cohort's Linear keeps {out, in}; the file carries no
// cohort metadata, and may hold the attention-mask buffers h.{i}.attn.bias.
#pragma once
#include <string>

#include "train/checkpoint.h"

namespace cohort {

// Whether `file` is a Hugging Face GPT-2 checkpoint: no cohort "model"
// metadata, a wte.weight, and h.0.attn.c_attn.weight laid out {C, 3C}.
bool is_hf_gpt2(const SafetensorsFile& file);

// Turns such a file into a cohort checkpoint of `model_name` in place: the
// projections transposed to {out, in} (as f32), the model metadata set.
void from_hf_gpt2(SafetensorsFile& file, const std::string& model_name);

}  // namespace cohort
