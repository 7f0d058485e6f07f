// Token + position embedding of decoder-only transformers (GPT-2, as llm.c
// defines it); forward and backward side by side. Shape letters: B batch,
// T sequence, C channels, V vocabulary. Token ids are i32 {B, T}; the output
// is of the shape's dtype (f32 or bf16), the tables and their gradients f32.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace cohort::ops {

// Token + position embedding: dst[b, t, :] = wte[ids[b, t], :] + wpe[t, :].
// wte {V, C}, wpe {maxT, C}; dst {B, T, C}. Backward adds (accumulate) or
// writes dwte (rows of the tokens seen; the others zeroed when !accumulate)
// and dwpe (rows 0..T-1). An id outside [0, V) is an InputError naming it.
struct EmbeddingShape {
  int64_t b, t, c, vocab, max_t;
  DType dtype = DType::kF32;
};
void embedding_forward(const EmbeddingShape& s, const int32_t* ids, ConstView wte, ConstView wpe,
                       View dst);
void embedding_backward(const EmbeddingShape& s, const int32_t* ids, ConstView ddst, View dwte,
                        View dwpe, bool accumulate);

}  // namespace cohort::ops
