"""`hf-export`: cohort's GPT-2 weights (f32 safetensors, cohort's names) as a
Hugging Face GPT-2 model.safetensors, for testing cohort's `--load` of HF files.

The names stay (HF's GPT2Model checkpoint has the same ones, with no
"transformer." prefix and no lm_head: the head is tied to wte). HF keeps the
four projections in Conv1D layout {in, out}, so c_attn, attn.c_proj, mlp.c_fc
and mlp.c_proj weights are transposed; everything else is copied. As the Hub's
gpt2 files do, each block also gets h.{i}.attn.bias, the causal mask buffer
{1, 1, maxT, maxT} (ones on and below the diagonal), unless --no-attn-bias
(files from newer save_pretrained lack it). Header metadata: format = pt.
numpy only, no torch.
"""

import numpy as np

from .common import die, log
from .models import gpt2_config, gpt2_shapes
from .safetensors_f32 import read_safetensors, write_safetensors

CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def hf_tensors(weights, shapes, context, attn_bias):
    """[(HF name, array)] from cohort's `weights` (checked against `shapes`)."""
    mask = np.tril(np.ones((context, context), dtype=np.float32)).reshape(1, 1, context, context)
    out = []
    for name, shape in shapes:
        w = weights[name]
        if name.endswith(CONV1D):
            w = np.ascontiguousarray(w.T)  # {out, in} -> Conv1D's {in, out}
        if attn_bias and name.endswith(".ln_1.bias"):
            out.append((name, w))
            out.append((name[:-len("ln_1.bias")] + "attn.bias", mask))  # HF's place for it
            continue
        out.append((name, w))
    return out


def check_weights(path, weights, shapes):
    for name, shape in shapes:
        if name not in weights:
            die("%s lacks parameter '%s'" % (path, name))
        if tuple(weights[name].shape) != shape:
            hint = (" (--vocab and --seq size wte and wpe)"
                    if name in ("wte.weight", "wpe.weight") else "")
            die("%s: tensor '%s' has shape %s, expected %s%s"
                % (path, name, list(weights[name].shape), list(shape), hint))
    unknown = sorted(set(weights) - {n for n, _ in shapes})
    if unknown:
        log("note: not exported (not GPT-2 parameters): " + ", ".join(unknown[:8])
            + (" ..." if len(unknown) > 8 else ""))


def hf_export(args):
    shapes = gpt2_shapes(args.model, args.vocab, args.seq)
    weights = read_safetensors(args.weights)
    check_weights(args.weights, weights, shapes)
    context = gpt2_config(args.model, args.vocab, args.seq)[4]
    tensors = hf_tensors(weights, shapes, context, not args.no_attn_bias)
    write_safetensors(args.out, tensors, metadata={"format": "pt"})
    log("wrote %d tensors (%s, HF Conv1D layout%s) to %s"
        % (len(tensors), args.model, "" if args.no_attn_bias else ", with attn.bias masks",
           args.out))
