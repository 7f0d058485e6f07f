"""Training data as `cohort train` reads it: Fashion-MNIST from Debian's idx
files, or synthetic images (Gaussian pixels, uniform labels) of the model's
input shape. Tensors are NCHW float32 images and int64 labels; for token
models, int64 ids {B, T} and next-token targets {B, T} (synthetic only).
"""

import gzip
import os
import struct

import numpy as np
import torch

from .common import die
from .models import input_shape

FASHION_MEAN, FASHION_STD = 0.2860, 0.3530


def random_images(n, shape, g):
    """n images of `shape` (C, H, W) and n labels in [0, 10), drawn from g."""
    x = torch.randn((n,) + tuple(shape), generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    return x, y


def random_tokens(n, t, vocab, g):
    """n sequences of t token ids in [0, vocab) and their n x t targets, drawn
    from g (uniform: step times the model, not what it learns)."""
    x = torch.randint(0, vocab, (n, t), generator=g)
    y = torch.randint(0, vocab, (n, t), generator=g)
    return x, y


def read_idx_gz(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_fashion(limit, data_dir):
    out = []
    for prefix in ("train", "t10k"):
        ip = os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz")
        lp = os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz")
        for path in (ip, lp):
            if not os.path.exists(path):
                die("--data-dir: missing %s" % path)
        x = read_idx_gz(ip)
        y = read_idx_gz(lp)
        if prefix == "train" and limit > 0:
            x, y = x[:limit], y[:limit]
        x = torch.from_numpy(x.astype("float32")).unsqueeze(1)
        x = (x / 255.0 - FASHION_MEAN) / FASHION_STD
        out += [x, torch.from_numpy(y.astype("int64"))]
    return tuple(out)


def load_train_data(data, limit, data_dir, model):
    """(train_x, train_y, test_x, test_y); limit > 0 keeps the first `limit`
    training images."""
    if data == "synthetic":
        # The model's input shape, and 2000 test images, as `cohort train`.
        n = limit if limit > 0 else 60000
        tx, ty = random_images(n, input_shape(model),
                               torch.Generator().manual_seed(1234))
        vx, vy = random_images(2000, input_shape(model),
                               torch.Generator().manual_seed(5678))
        return tx, ty, vx, vy
    if data != "fashion-mnist":
        die("--data: unknown dataset '%s' (valid: fashion-mnist, synthetic)" % data)
    return load_fashion(limit, data_dir)


def epoch_order(n, base, rank, world, seed):
    """This rank's sample order for one epoch of n samples (n = base x repeat),
    as DistributedSampler: shuffle, pad to a multiple of world, take every
    world-th; sample i is image i % base."""
    per_rank = (n + world - 1) // world
    idx = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    if per_rank * world > n:
        idx = torch.cat([idx, idx[:per_rank * world - n]])
    return idx[rank::world] % base


def batches(x, y, order, batch):
    """(images, labels) of each batch of `batch` samples in `order`."""
    for i in range(0, order.shape[0], batch):
        b = order[i:i + batch]
        yield x[b], y[b]
