"""tv-export: torchvision's ImageNet models with random weights, as the test
of cohort's torchvision architectures reads them.

For each MODEL:SIZE[:SIZE...] of --models it writes DIR/MODEL.safetensors
(the state dict as torchvision saves it: F32 weights, I64
num_batches_tracked) and DIR/MODEL.batch.safetensors with, per SIZE, a fixed
batch `images.SIZE` [B, SIZE, SIZE, 3] (NHWC, cohort's layout) and its
eval-mode `logits.SIZE` [B, 1000]. Batch-norm gets non-trivial parameters
and running statistics (a few train-mode forwards), so the test sees them
used. On stdout, one JSON line: for each model of --names (and of --models),
its state dict's [name, shape, dtype] list and parameter count.
"""

import json

import torch

from .common import die
from .models import TORCHVISION, build_model, count_params
from .safetensors_f32 import write_safetensors


def parse_models(spec):
    """"resnet18:32:224,vgg16:32" -> [("resnet18", [32, 224]), ("vgg16", [32])]."""
    out = []
    for item in filter(None, spec.split(",")):
        name, *sizes = item.split(":")
        if name not in TORCHVISION:
            die("tv-export: '%s' is not one of %s" % (name, ", ".join(TORCHVISION)))
        try:
            sizes = [int(s) for s in sizes]
        except ValueError:
            die("tv-export: bad sizes in '%s'" % item)
        if not sizes or min(sizes) < 32:
            die("tv-export: '%s' needs input sizes of at least 32" % item)
        out.append((name, sizes))
    return out


def randomize_batch_norm(model, batches, size):
    """BN scale/shift away from 1/0, running statistics from train-mode forwards."""
    g = torch.Generator().manual_seed(7)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5, generator=g)
                m.bias.uniform_(-0.2, 0.2, generator=g)
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(4, 3, size, size, generator=g) * 1.5 + 0.3)
    model.eval()


def describe(model):
    return {"tensors": [[k, list(v.shape), str(v.dtype).replace("torch.", "")]
                        for k, v in model.state_dict().items()],
            "parameters": count_params(model)}


def tv_export(args):
    record = {}
    for name in filter(None, args.names.split(",")):
        if name not in TORCHVISION:
            die("tv-export: '%s' is not one of %s" % (name, ", ".join(TORCHVISION)))
        torch.manual_seed(args.seed)
        record[name] = describe(build_model(name))
    for name, sizes in parse_models(args.models):
        torch.manual_seed(args.seed)
        model = build_model(name)
        randomize_batch_norm(model, 3, min(sizes))
        state = [(k, v.numpy()) for k, v in model.state_dict().items()]
        write_safetensors("%s/%s.safetensors" % (args.out, name), state)
        batch = []
        g = torch.Generator().manual_seed(args.seed + 1)
        for size in sizes:
            x = torch.randn(args.batch, 3, size, size, generator=g)
            with torch.no_grad():
                logits = model(x)
            batch += [("images.%d" % size, x.permute(0, 2, 3, 1).numpy()),
                      ("logits.%d" % size, logits.numpy())]
        write_safetensors("%s/%s.batch.safetensors" % (args.out, name), batch)
        record[name] = describe(model)
    print(json.dumps(record), flush=True)
