#include "train/hf_gpt2.h"

namespace cohort {
namespace {

bool is_conv1d(const std::string& name) {
  for (const char* end : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight",
                          ".mlp.c_proj.weight"}) {
    const std::string e = end;
    if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0 &&
        name.rfind("h.", 0) == 0)
      return true;
  }
  return false;
}

// {rows, cols} -> {cols, rows}, f32.
Tensor transposed(const Tensor& t) {
  Tensor src = t;
  if (t.dtype() != DType::kF32) {
    src = Tensor::empty(t.shape());
    src.copy_from(t);
  }
  const int64_t r = t.dim(0), c = t.dim(1);
  Tensor out = Tensor::empty({c, r});
  const float* s = src.f32();
  float* d = out.f32();
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) d[j * r + i] = s[i * c + j];
  return out;
}

}  // namespace

bool is_hf_gpt2(const SafetensorsFile& file) {
  if (file.metadata.count("model")) return false;
  const Tensor* wte = file.find("wte.weight");
  const Tensor* qkv = file.find("h.0.attn.c_attn.weight");
  return wte && qkv && wte->ndim() == 2 && qkv->ndim() == 2 && qkv->dim(0) == wte->dim(1) &&
         qkv->dim(1) == 3 * wte->dim(1);
}

void from_hf_gpt2(SafetensorsFile& file, const std::string& model_name) {
  for (NamedTensor& t : file.tensors)
    if (is_conv1d(t.name) && t.tensor.ndim() == 2) t.tensor = transposed(t.tensor);
  file.metadata["model"] = model_name;
}

}  // namespace cohort
