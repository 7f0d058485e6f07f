"""GPT-2 as cohort builds it (llm.c's train_gpt2.py), an nn.Module of its own.

Parameter names are Hugging Face GPT2Model's (wte, wpe, h.{i}.*, ln_f), but
every Linear keeps nn.Linear's {out, in} weight, not HF's Conv1D {in, out}
(hfexport.py transposes). The output projection is tied to wte: logits =
ln_f(x) @ wte^T, no separate tensor, no bias; wte's gradient sums both uses.

Shape letters: B batch, T sequence, C width, NH heads, HS = C / NH, V vocab.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .amp import at_least_f32


class CausalSelfAttention(nn.Module):
    def __init__(self, c, heads, device):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(c, 3 * c, device=device)  # q, k, v in that order along the last dim
        self.c_proj = nn.Linear(c, c, device=device)

    def forward(self, x):                   # B x T x C
        b, t, c = x.shape
        hs = c // self.heads
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, hs).transpose(1, 2) for z in (q, k, v))  # B x NH x T x HS
        # Scores and softmax in f32 (under bf16 autocast the matmuls are bf16).
        att = at_least_f32(q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # B x NH x T x T
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(future, float("-inf")).softmax(dim=-1).to(v.dtype)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, c, device):
        super().__init__()
        self.c_fc = nn.Linear(c, 4 * c, device=device)
        self.c_proj = nn.Linear(4 * c, c, device=device)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, c, heads, device):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c, eps=1e-5, device=device)
        self.attn = CausalSelfAttention(c, heads, device)
        self.ln_2 = nn.LayerNorm(c, eps=1e-5, device=device)
        self.mlp = MLP(c, device)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, layers, width, heads, vocab, context, device=None):
        """device "meta": shapes only, no storage (count)."""
        super().__init__()
        if width % heads:
            raise ValueError("width %d is not a multiple of heads %d" % (width, heads))
        self.context = context
        self.wte = nn.Embedding(vocab, width, device=device)    # V x C
        self.wpe = nn.Embedding(context, width, device=device)  # maxT x C
        self.h = nn.ModuleList(Block(width, heads, device) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width, eps=1e-5, device=device)
        if device != "meta":
            self.init_weights(layers)

    def init_weights(self, layers):
        # GPT-2's: N(0, 0.02) weights and embeddings, the residual projections
        # (c_proj) scaled by 1/sqrt(2 L), zero biases, LayerNorm ones/zeros.
        proj_std = 0.02 / math.sqrt(2 * layers)
        for name, m in self.named_modules():
            if isinstance(m, nn.Linear):
                std = proj_std if name.endswith("c_proj") else 0.02
                nn.init.normal_(m.weight, 0.0, std)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, ids):                 # B x T int64 -> B x T x V logits
        t = ids.shape[1]
        if t > self.context:
            raise ValueError("sequence of %d tokens exceeds the context %d" % (t, self.context))
        pos = torch.arange(t, device=ids.device)
        x = self.wte(ids) + self.wpe(pos)   # B x T x C
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)
