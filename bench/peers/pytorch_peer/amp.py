"""Mixed precision as PyTorch AMP does it on the CPU: forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16); the parameters (the master
weights) and their gradients stay float32, and bf16 needs no GradScaler.
PyTorch 1.13's CPU autocast has only bf16, so cli.py refuses fp16.
"""

import contextlib

import torch
import torch.nn.functional as F


def autocast(precision):
    """The context forward and loss run under for `precision` (fp32 or bf16)."""
    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def mean_cross_entropy(out, y):
    """Mean cross-entropy of logits `out` against class ids `y`: image nets'
    {N, 10} against {N}; token models' {B, T, V} against the next tokens, every
    position counted, with the logits widened to f32 first (over V = 50257
    classes a bf16 log-softmax would lose the loss)."""
    if out.dim() == 2:
        return F.cross_entropy(out, y)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))
