"""Mixed precision as PyTorch AMP does it on the CPU: forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16); the parameters (the master
weights) and their gradients stay float32, and bf16 needs no GradScaler.
PyTorch 1.13's CPU autocast has only bf16, so cli.py refuses fp16.
"""

import contextlib

import torch


def autocast(precision):
    """The context forward and loss run under for `precision` (fp32 or bf16)."""
    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()
