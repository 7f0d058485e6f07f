"""Mixed precision as PyTorch AMP does it on the CPU: forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16); the parameters (the master
weights) and their gradients stay float32, and bf16 needs no GradScaler.
PyTorch 1.13's CPU autocast has only bf16, so cli.py refuses fp16.
Autocast already runs cross-entropy and layer-norm in f32 but not softmax, so
GPT-2's attention widens its scores itself (at_least_f32).
"""

import contextlib

import torch
import torch.nn.functional as F


def autocast(precision):
    """The context forward and loss run under for `precision` (fp32 or bf16)."""
    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def at_least_f32(t):
    """t widened to f32 if narrower (bf16 under autocast); f32 and f64 stay."""
    return t.float() if t.element_size() < 4 else t


def mean_cross_entropy(out, y):
    """Mean cross-entropy of logits `out` against class ids `y`: image nets'
    {N, 10} against {N}; token models' {B, T, V} against the next tokens, every
    position counted, with the logits widened to f32 first (over V = 50257
    classes a bf16 log-softmax would lose the loss)."""
    if out.dim() == 2:
        return F.cross_entropy(out, y)
    return F.cross_entropy(at_least_f32(out.reshape(-1, out.shape[-1])), y.reshape(-1))
