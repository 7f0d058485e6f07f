"""`grads`: every parameter's gradient of the mean cross-entropy, in eval()
mode, for given weights and one batch; cohort's numerics tests compare with it.
With --precision bf16 forward and loss run under CPU autocast (amp.py), as
PyTorch AMP trains; the gradients are still of the float32 parameters.

Files are safetensors, F32: weights by parameter name (BN running stats may be
absent), the batch as `images` [N, H, W, C] (NHWC) and `labels` [N] class ids;
the output holds each gradient under its parameter's name, plus `loss` [1].

Token models (gpt2*): the batch's `images` are the token ids [B, T] and
`labels` the next tokens [B*T] ([B, T] is taken too), ids as exact f32 values
in [0, V); T may be below the context (--seq). The loss is the mean over all
B*T positions; wte's gradient is written once, the sum over its two uses
(embedding and the tied output projection).
"""

import numpy as np
import torch

from .amp import autocast, mean_cross_entropy
from .common import die, log
from .models import build_model, gpt2_config, input_shape, is_token_model
from .safetensors_f32 import read_safetensors, write_safetensors


def load_weights(model, path):
    weights = read_safetensors(path)
    sd = model.state_dict()
    missing = [k for k in sd if k not in weights]
    # BN running stats / num_batches_tracked may be absent; params may not.
    missing_params = [n for n, _ in model.named_parameters() if n not in weights]
    if missing_params:
        die("%s lacks parameters: %s" % (path, ", ".join(missing_params)))
    unknown = [k for k in weights if k not in sd]
    if unknown:
        log("warning: ignoring tensors not in the model: " + ", ".join(unknown))
    new_sd = {}
    for k, v in sd.items():
        if k in weights:
            w = weights[k]
            if tuple(w.shape) != tuple(v.shape):
                hint = (" (--vocab and --seq size wte and wpe)"
                        if k in ("wte.weight", "wpe.weight") else "")
                die("tensor '%s': shape %s in file, model expects %s%s"
                    % (k, list(w.shape), list(v.shape), hint))
            new_sd[k] = torch.from_numpy(w).to(v.dtype)
        else:
            new_sd[k] = v
    if missing:
        log("note: using defaults for buffers not in file: " + ", ".join(missing))
    model.load_state_dict(new_sd)


def load_batch(path, model_name, vocab=0, seq=0):
    """(x, y): x NCHW float32 from the file's NHWC images, y int64 labels;
    for token models, load_tokens' pair."""
    batch = read_safetensors(path)
    for k in ("images", "labels"):
        if k not in batch:
            die("%s lacks tensor '%s'" % (path, k))
    img, lab = batch["images"], batch["labels"]
    if is_token_model(model_name):
        return load_tokens(path, img, lab, gpt2_config(model_name, vocab, seq))
    c, h, w = input_shape(model_name)
    if img.ndim != 4 or tuple(img.shape[1:]) != (h, w, c):
        die("images shape %s, expected [N,%d,%d,%d] (NHWC)"
            % (list(img.shape), h, w, c))
    if lab.shape != (img.shape[0],):
        die("labels shape %s, expected [%d]" % (list(lab.shape), img.shape[0]))
    x = torch.from_numpy(img).permute(0, 3, 1, 2).contiguous()
    y = torch.from_numpy(np.rint(lab).astype(np.int64))
    if (y < 0).any() or (y >= 10).any():
        die("labels must be class ids in [0,10)")
    return x, y


def token_ids(path, name, a, vocab):
    """int64 ids from f32 values that must be whole numbers in [0, vocab)."""
    ids = np.rint(a)
    if not np.array_equal(ids, a) or (ids < 0).any() or (ids >= vocab).any():
        bad = a[(ids != a) | (ids < 0) | (ids >= vocab)][0]
        die("%s: '%s' holds %r, not a token id in [0,%d)" % (path, name, float(bad), vocab))
    return torch.from_numpy(ids.astype(np.int64))


def load_tokens(path, img, lab, config):
    """(x, y): ids {B, T} and targets {B*T}, int64."""
    _, _, _, vocab, context = config
    if img.ndim != 2 or not 1 <= img.shape[1] <= context:
        die("%s: images shape %s, expected token ids [B,T] with T <= %d (--seq)"
            % (path, list(img.shape), context))
    b, t = img.shape
    if lab.shape not in ((b * t,), (b, t)):
        die("%s: labels shape %s, expected [%d] (B*T next tokens)"
            % (path, list(lab.shape), b * t))
    return token_ids(path, "images", img, vocab), token_ids(path, "labels", lab, vocab).reshape(-1)


def write_grads(args):
    torch.set_num_threads(max(1, args.threads))
    torch.manual_seed(0)
    model = build_model(args.model, args.vocab, args.seq)
    load_weights(model, args.weights)
    x, y = load_batch(args.batch_file, args.model, args.vocab, args.seq)
    model.eval()
    model.zero_grad()
    with autocast(args.precision):
        loss = mean_cross_entropy(model(x), y)
    loss.backward()
    out = []
    for n, p in model.named_parameters():
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        out.append((n, g.detach().numpy()))
    out.append(("loss", np.array([loss.item()], dtype=np.float32)))
    write_safetensors(args.out, out)
    log("%s loss %.6f, wrote %d gradients to %s"
        % (args.precision, loss.item(), len(out) - 1, args.out))
