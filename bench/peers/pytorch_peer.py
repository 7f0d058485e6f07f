#!/usr/bin/python3
"""PyTorch peer for cohort's benchmarks and gradient cross-checks.

Run with Debian's interpreter (/usr/bin/python3, python3-torch), e.g.

    /usr/bin/python3 bench/peers/pytorch_peer.py count --model mnist-small
    /usr/bin/python3 bench/peers/pytorch_peer.py step --model mnist-small --batch 128 --threads 1
    /usr/bin/python3 bench/peers/pytorch_peer.py step --model mnist-small --batch 128 --threads 1 --world 2
    /usr/bin/python3 bench/peers/pytorch_peer.py grads --model lenet \
        --weights W.safetensors --batch-file X.safetensors --out G.safetensors
    /usr/bin/python3 bench/peers/pytorch_peer.py allreduce-bench --world 2 \
        --sizes 4,65536,1048576 --iters 20
    /usr/bin/python3 bench/peers/pytorch_peer.py train --model mnist-small \
        --batch 128 --repeat 1 --epochs 2 --limit 6000 --threads 1 --world 2
    /usr/bin/python3 bench/peers/pytorch_peer.py train --model mnist-large \
        --data synthetic --limit 512 --threads 2 --pipe-stages 2 --micro-batches 4

The models mirror the ones cohort builds, with identical parameter names
(state_dict keys). Only stdout carries the result (one JSON line); everything
else goes to stderr.
"""

import argparse
import json
import os
import resource
import socket
import struct
import sys
import time

MODELS = ("mnist-small", "mnist-large", "lenet", "vgg16",
          "resnet50", "resnet101", "resnet152")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def die(msg, code=2):
    log("pytorch_peer: error: " + msg)
    sys.exit(code)


def set_thread_env(threads):
    # Must happen before torch is imported so intra-op pools are sized right.
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[k] = str(threads)


# ---------------------------------------------------------------------------
# Models (torch is imported lazily so thread env vars can be set first)
# ---------------------------------------------------------------------------

def input_shape(name):
    if name in ("mnist-small", "mnist-large", "lenet"):
        return (1, 28, 28)
    return (3, 32, 32)


def build_model(name):
    import torch.nn as nn
    import torch.nn.functional as F

    class MnistSmall(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
            self.fc1 = nn.Linear(6272, 64)
            self.fc2 = nn.Linear(64, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = x.flatten(1)
            return self.fc2(F.relu(self.fc1(x)))

    class MnistLarge(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 128, 3)
            self.conv2 = nn.Conv2d(128, 256, 3)
            self.conv3 = nn.Conv2d(256, 512, 3)
            self.fc1 = nn.Linear(512, 512)
            self.fc2 = nn.Linear(512, 512)
            self.fc3 = nn.Linear(512, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)   # 128x13x13
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)   # 256x5x5
            x = F.max_pool2d(F.relu(self.conv3(x)), 2)   # 512x1x1
            x = x.flatten(1)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

    class LeNet(nn.Module):
        # The classic PyTorch MNIST example, minus the final log_softmax.
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 10, 5)
            self.conv2 = nn.Conv2d(10, 20, 5)
            self.conv2_drop = nn.Dropout2d(0.5)
            self.fc1 = nn.Linear(320, 50)
            self.fc2 = nn.Linear(50, 10)

        def forward(self, x):
            x = F.relu(F.max_pool2d(self.conv1(x), 2))
            x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
            x = x.flatten(1)
            x = F.relu(self.fc1(x))
            x = F.dropout(x, 0.5, training=self.training)
            return self.fc2(x)

    class VGG16(nn.Module):
        CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M",
               512, 512, 512, "M", 512, 512, 512, "M"]

        def __init__(self):
            super().__init__()
            self.plan = []
            cin, i = 3, 0
            for v in self.CFG:
                if v == "M":
                    self.plan.append(None)
                    continue
                i += 1
                setattr(self, "conv%d" % i, nn.Conv2d(cin, v, 3, padding=1))
                setattr(self, "bn%d" % i, nn.BatchNorm2d(v))
                self.plan.append(i)
                cin = v
            self.fc = nn.Linear(512, 10)

        def forward(self, x):
            for i in self.plan:
                if i is None:
                    x = F.max_pool2d(x, 2)
                else:
                    conv = getattr(self, "conv%d" % i)
                    bn = getattr(self, "bn%d" % i)
                    x = F.relu(bn(conv(x)))
            return self.fc(x.flatten(1))

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin, planes, stride):
            super().__init__()
            cout = planes * self.expansion
            self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride,
                                   padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(
                    nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                    nn.BatchNorm2d(cout))
            else:
                self.downsample = None

        def forward(self, x):
            idt = x if self.downsample is None else self.downsample(x)
            out = F.relu(self.bn1(self.conv1(x)))
            out = F.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return F.relu(out + idt)

    class ResNet(nn.Module):
        def __init__(self, blocks):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            cin = 64
            for li, (planes, n) in enumerate(zip((64, 128, 256, 512), blocks)):
                layer = []
                for b in range(n):
                    stride = 2 if (li > 0 and b == 0) else 1
                    layer.append(Bottleneck(cin, planes, stride))
                    cin = planes * Bottleneck.expansion
                setattr(self, "layer%d" % (li + 1), nn.Sequential(*layer))
            self.fc = nn.Linear(2048, 10)

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x)))
            x = self.layer1(x)
            x = self.layer2(x)
            x = self.layer3(x)
            x = self.layer4(x)
            x = F.adaptive_avg_pool2d(x, 1)
            return self.fc(x.flatten(1))

    if name == "mnist-small":
        return MnistSmall()
    if name == "mnist-large":
        return MnistLarge()
    if name == "lenet":
        return LeNet()
    if name == "vgg16":
        return VGG16()
    if name == "resnet50":
        return ResNet([3, 4, 6, 3])
    if name == "resnet101":
        return ResNet([3, 4, 23, 3])
    if name == "resnet152":
        return ResNet([3, 8, 36, 3])
    die("unknown model '%s' (known: %s)" % (name, ", ".join(MODELS)))


def count_params(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# ---------------------------------------------------------------------------
# safetensors (F32 only), written and read by hand
# ---------------------------------------------------------------------------

def write_safetensors(path, tensors):
    """tensors: list of (name, numpy array) or dict; stored as F32 little-endian."""
    import numpy as np
    items = list(tensors.items()) if isinstance(tensors, dict) else list(tensors)
    header, blobs, off = {}, [], 0
    for name, arr in items:
        a = np.ascontiguousarray(np.asarray(arr, dtype="<f4"))
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """Returns dict name -> numpy float32 array (F32 entries only)."""
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        die("%s: too short to be a safetensors file" % path)
    (hlen,) = struct.unpack("<Q", raw[:8])
    if 8 + hlen > len(raw):
        die("%s: header length %d exceeds file size" % (path, hlen))
    try:
        header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    except ValueError as e:
        die("%s: bad safetensors header: %s" % (path, e))
    data = raw[8 + hlen:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info.get("dtype") != "F32":
            die("%s: tensor '%s' has dtype %s, only F32 is supported"
                % (path, name, info.get("dtype")))
        b, e = info["data_offsets"]
        shape = tuple(int(s) for s in info["shape"])
        n = 1
        for s in shape:
            n *= s
        if e - b != 4 * n or e > len(data) or b < 0:
            die("%s: tensor '%s' offsets [%d,%d] do not match shape %s"
                % (path, name, b, e, list(shape)))
        out[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(shape).copy()
    return out


# ---------------------------------------------------------------------------
# Subcommands
# ---------------------------------------------------------------------------

def cmd_count(args):
    import torch
    torch.manual_seed(0)
    model = build_model(args.model)
    print(json.dumps({"model": args.model, "parameters": count_params(model)}),
          flush=True)


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_steps(model_name, batch, threads, steps, warmup, seed, rank, world,
              ddp):
    """Builds the model and times `steps` training steps. Returns elapsed s."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    torch.manual_seed(seed)  # same init on every rank (DDP also broadcasts)
    model = build_model(model_name)
    model.train()
    if ddp:
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.001, eps=1e-7)
    g = torch.Generator().manual_seed(seed * 1000 + rank + 1)
    x = torch.randn((batch,) + input_shape(model_name), generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(warmup):
        step()
    if ddp:
        import torch.distributed as dist
        dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    elapsed = time.perf_counter() - t0
    if ddp:
        dist.barrier()
    log("rank %d: %d steps in %.3fs, last loss %.4f"
        % (rank, steps, elapsed, float(loss)))
    return elapsed


def ddp_worker(rank, world, port, a, result_q):
    set_thread_env(a["threads"])
    import torch
    import torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["GLOO_SOCKET_IFNAME"] = os.environ.get("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(a["threads"])
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            init_method="tcp://127.0.0.1:%d" % port)
    try:
        el = run_steps(a["model"], a["batch"], a["threads"], a["steps"],
                       a["warmup"], a["seed"], rank, world, True)
        result_q.put((rank, el))
    finally:
        dist.destroy_process_group()


def cmd_step(args):
    if args.model not in MODELS:
        die("unknown model '%s' (known: %s)" % (args.model, ", ".join(MODELS)))
    for name in ("batch", "threads", "steps", "world"):
        if getattr(args, name) < 1:
            die("--%s must be >= 1 (got %d)" % (name, getattr(args, name)))
    if args.warmup < 0:
        die("--warmup must be >= 0 (got %d)" % args.warmup)
    set_thread_env(args.threads)
    import torch

    a = {"model": args.model, "batch": args.batch, "threads": args.threads,
         "steps": args.steps, "warmup": args.warmup, "seed": args.seed}
    if args.world == 1:
        elapsed = run_steps(args.model, args.batch, args.threads, args.steps,
                            args.warmup, args.seed, 0, 1, False)
    else:
        import torch.multiprocessing as mp
        ctx = mp.get_context("spawn")
        q = ctx.SimpleQueue()
        port = free_port()
        mp.start_processes(ddp_worker, args=(args.world, port, a, q),
                           nprocs=args.world, join=True, start_method="spawn")
        times = {}
        while not q.empty():
            r, el = q.get()
            times[r] = el
        if len(times) != args.world:
            die("only %d of %d ranks reported a time" % (len(times), args.world),
                code=1)
        elapsed = max(times.values())

    images = args.world * args.batch * args.steps
    print(json.dumps({
        "peer": "pytorch", "torch": torch.__version__, "model": args.model,
        "batch": args.batch, "threads": args.threads, "world": args.world,
        "steps": args.steps, "images_per_second": images / elapsed,
        "seconds_per_step": elapsed / args.steps}), flush=True)


def cmd_grads(args):
    import numpy as np
    import torch
    import torch.nn.functional as F
    if args.model not in MODELS:
        die("unknown model '%s' (known: %s)" % (args.model, ", ".join(MODELS)))
    torch.set_num_threads(max(1, args.threads))
    torch.manual_seed(0)
    model = build_model(args.model)
    weights = read_safetensors(args.weights)
    sd = model.state_dict()
    missing = [k for k in sd if k not in weights]
    # BN running stats / num_batches_tracked may be absent; params may not.
    pnames = [n for n, _ in model.named_parameters()]
    missing_params = [k for k in pnames if k not in weights]
    if missing_params:
        die("%s lacks parameters: %s" % (args.weights, ", ".join(missing_params)))
    unknown = [k for k in weights if k not in sd]
    if unknown:
        log("warning: ignoring tensors not in the model: " + ", ".join(unknown))
    new_sd = {}
    for k, v in sd.items():
        if k in weights:
            w = weights[k]
            if tuple(w.shape) != tuple(v.shape):
                die("tensor '%s': shape %s in file, model expects %s"
                    % (k, list(w.shape), list(v.shape)))
            new_sd[k] = torch.from_numpy(w).to(v.dtype)
        else:
            new_sd[k] = v
    if missing:
        log("note: using defaults for buffers not in file: " + ", ".join(missing))
    model.load_state_dict(new_sd)

    batch = read_safetensors(args.batch_file)
    for k in ("images", "labels"):
        if k not in batch:
            die("%s lacks tensor '%s'" % (args.batch_file, k))
    img, lab = batch["images"], batch["labels"]
    c, h, w = input_shape(args.model)
    if img.ndim != 4 or tuple(img.shape[1:]) != (h, w, c):
        die("images shape %s, expected [N,%d,%d,%d] (NHWC)"
            % (list(img.shape), h, w, c))
    if lab.shape != (img.shape[0],):
        die("labels shape %s, expected [%d]" % (list(lab.shape), img.shape[0]))
    x = torch.from_numpy(img).permute(0, 3, 1, 2).contiguous()
    y = torch.from_numpy(np.rint(lab).astype(np.int64))
    if (y < 0).any() or (y >= 10).any():
        die("labels must be class ids in [0,10)")

    model.eval()
    model.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    out = []
    for n, p in model.named_parameters():
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        out.append((n, g.detach().numpy()))
    out.append(("loss", np.array([loss.item()], dtype=np.float32)))
    write_safetensors(args.out, out)
    log("loss %.6f, wrote %d gradients to %s" % (loss.item(), len(out) - 1,
                                                args.out))


def allreduce_worker(rank, world, port, a, result_q):
    """One gloo rank: validates then times all_reduce for each size."""
    set_thread_env(1)
    import torch
    import torch.distributed as dist
    os.environ["GLOO_SOCKET_IFNAME"] = os.environ.get("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            init_method="tcp://127.0.0.1:%d" % port)
    try:
        results = []
        for nbytes in a["sizes"]:
            n = max(1, nbytes // 4)
            # Closed form: (rank+1)*(i%7) sums exactly to (i%7)*world(world+1)/2.
            i7 = torch.arange(n, dtype=torch.int64) % 7
            t = (i7 * (rank + 1)).to(torch.float32)
            dist.all_reduce(t)
            want = (i7 * (world * (world + 1) // 2)).to(torch.float32)
            if not torch.equal(t, want):
                raise RuntimeError("gloo all_reduce of %d floats is wrong" % n)
            t.zero_()  # zeros keep the repeated sums finite
            dist.all_reduce(t)  # warm-up
            # Rank 0 sizes the batches from one timed call, for all ranks.
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            one = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.broadcast(one, 0)
            iters = a["iters"]
            if a["seconds"] > 0:
                want_iters = int(a["seconds"] / a["repeats"] / max(one.item(), 1e-7))
                iters = max(1, min(iters, want_iters))
            best = float("inf")
            for _ in range(a["repeats"]):
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(iters):
                    dist.all_reduce(t)
                el = torch.tensor([(time.perf_counter() - t0) / iters],
                                  dtype=torch.float64)
                dist.all_reduce(el, op=dist.ReduceOp.MAX)  # the slowest rank
                best = min(best, el.item())
            busbw = 2.0 * (world - 1) / world * n * 4 / best / 1e9
            results.append({"bytes": n * 4, "seconds": best, "iters": iters,
                            "busbw_gbps": busbw})
            if rank == 0:
                log("gloo: %d ranks, %d bytes: %.1f us, busbw %.3f GB/s"
                    % (world, n * 4, best * 1e6, busbw))
        if rank == 0:
            result_q.put(results)
    finally:
        dist.destroy_process_group()


def cmd_allreduce_bench(args):
    if args.world < 2:
        die("--world must be >= 2 (got %d)" % args.world)
    if args.iters < 1 or args.repeats < 1:
        die("--iters and --repeats must be >= 1")
    try:
        sizes = [int(x) for x in args.sizes.split(",") if x]
    except ValueError:
        die("--sizes: expected comma-separated byte counts, got '%s'" % args.sizes)
    if not sizes or min(sizes) < 1:
        die("--sizes: expected positive byte counts, got '%s'" % args.sizes)
    set_thread_env(1)
    import torch
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    a = {"sizes": sizes, "iters": args.iters, "repeats": args.repeats,
         "seconds": args.seconds}
    mp.start_processes(allreduce_worker, args=(args.world, free_port(), a, q),
                       nprocs=args.world, join=True, start_method="spawn")
    if q.empty():
        die("rank 0 reported no results", code=1)
    print(json.dumps({"peer": "gloo", "torch": torch.__version__,
                      "world": args.world, "results": q.get()}), flush=True)


# ---------------------------------------------------------------------------
# train: the same run as `cohort train` (for `cohort bench grid --peer pytorch`)
# ---------------------------------------------------------------------------

FASHION_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx_gz(path):
    import gzip
    import numpy as np
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_train_data(data, limit, data_dir, model="mnist-small"):
    """(train_x, train_y, test_x, test_y) as torch tensors, NCHW float32."""
    import torch
    if data == "synthetic":
        # The model's input shape, and 2000 test images, as `cohort train`.
        n = limit if limit > 0 else 60000
        g = torch.Generator().manual_seed(1234)
        tx = torch.randn((n,) + input_shape(model), generator=g)
        ty = torch.randint(0, 10, (n,), generator=g)
        g = torch.Generator().manual_seed(5678)
        vx = torch.randn((2000,) + input_shape(model), generator=g)
        vy = torch.randint(0, 10, (2000,), generator=g)
        return tx, ty, vx, vy
    if data != "fashion-mnist":
        die("--data: unknown dataset '%s' (valid: fashion-mnist, synthetic)" % data)
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
        x = (x / 255.0 - 0.2860) / 0.3530
        out += [x, torch.from_numpy(y.astype("int64"))]
    return tuple(out)


def train_worker(rank, world, port, a, result_q):
    """One rank of `train`: rank 0 puts its summary on result_q."""
    set_thread_env(a["threads"])
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(a["threads"])
    ddp = world > 1
    if ddp:
        import torch.distributed as dist
        os.environ["GLOO_SOCKET_IFNAME"] = os.environ.get("GLOO_SOCKET_IFNAME", "lo")
        dist.init_process_group("gloo", rank=rank, world_size=world,
                                init_method="tcp://127.0.0.1:%d" % port)
    try:
        tx, ty, vx, vy = load_train_data(a["data"], a["limit"], a["data_dir"], a["model"])
        if a["data"] == "fashion-mnist" and input_shape(a["model"]) != (1, 28, 28):
            die("--model %s takes %s images but --data fashion-mnist has 1x28x28"
                % (a["model"], "x".join(map(str, input_shape(a["model"])))))
        torch.manual_seed(a["seed"])
        model = build_model(a["model"])
        net = model
        if ddp:
            from torch.nn.parallel import DistributedDataParallel
            model = DistributedDataParallel(model)
        pipe = a["pipe_stages"] > 1
        if pipe:
            model = make_pipe(a["model"], net, a["pipe_stages"], a["micro_batches"])
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
        n = tx.shape[0] * a["repeat"]
        per_rank = (n + world - 1) // world  # DistributedSampler: pad, then stride
        epoch_seconds, epoch_ips = [], []
        data_s = compute_s = 0.0
        steps = 0
        for epoch in range(a["epochs"]):
            g = torch.Generator().manual_seed(a["seed"] + epoch)
            idx = torch.randperm(n, generator=g)
            if per_rank * world > n:
                idx = torch.cat([idx, idx[:per_rank * world - n]])
            idx = idx[rank::world] % tx.shape[0]
            model.train()
            if ddp:
                dist.barrier()
            t0 = time.perf_counter()
            for i in range(0, idx.shape[0], a["batch"]):
                t1 = time.perf_counter()
                b = idx[i:i + a["batch"]]
                x, y = tx[b], ty[b]
                t2 = time.perf_counter()
                opt.zero_grad()
                out = model(x)
                loss = F.cross_entropy(out.local_value() if pipe else out, y)
                loss.backward()
                opt.step()
                data_s += t2 - t1
                compute_s += time.perf_counter() - t2
                steps += 1
            if ddp:
                dist.barrier()
            secs = time.perf_counter() - t0
            epoch_seconds.append(secs)
            epoch_ips.append(idx.shape[0] * world / secs)
            log("rank %d epoch %d: %.2fs, loss %.4f" % (rank, epoch + 1, secs, float(loss)))
        if rank == 0:
            # The test pass is not timed, and the other ranks are done: use
            # every CPU, as cohort's ranks share the pass between them.
            torch.set_num_threads(len(os.sched_getaffinity(0)))
            net.eval()
            correct = 0
            with torch.no_grad():
                for i in range(0, vx.shape[0], 1000):
                    correct += int((net(vx[i:i + 1000]).argmax(1) == vy[i:i + 1000]).sum())
            total_images = per_rank * world * a["epochs"]
            result_q.put({
                "event": "summary", "peer": "pytorch", "torch": torch.__version__,
                "model": a["model"], "batch": a["batch"], "threads": a["threads"],
                "world_size": world, "global_batch": a["batch"] * world,
                "test_accuracy": correct / vx.shape[0],
                "epoch_seconds": epoch_seconds,
                "epoch_images_per_second": epoch_ips,
                "images_per_second": total_images / sum(epoch_seconds),
                "peak_memory_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                # Per step on rank 0. DDP reduces gradients inside backward, so
                # its communication is part of "compute" here.
                "step_seconds": {"total": (data_s + compute_s) / steps,
                                 "compute": compute_s / steps,
                                 "data": data_s / steps},
                "communication_in_compute": ddp,
                "pipeline": ({"stages": a["pipe_stages"], "micro_batches": a["micro_batches"],
                              "schedule": "gpipe", "checkpoint": "never"} if pipe else None)})
    finally:
        if ddp:
            dist.destroy_process_group()
        if a["pipe_stages"] > 1:
            from torch.distributed import rpc
            rpc.shutdown()


def model_units(name, net):
    """The model as cohort's top-level layers (src/nn/models/), each with the
    ReLU cohort fuses into it, sharing net's parameters: Pipe then cuts where
    cohort's --stages cuts. Parameter-free layers are new modules each time
    (Pipe drops a module that appears twice)."""
    import torch.nn as nn
    relu, pool2, flat = nn.ReLU, lambda: nn.MaxPool2d(2), nn.Flatten
    if name == "mnist-small":
        return [nn.Sequential(net.conv1, relu(), pool2()), flat(),
                nn.Sequential(net.fc1, relu()), net.fc2]
    if name == "mnist-large":
        return [nn.Sequential(net.conv1, relu(), pool2()),
                nn.Sequential(net.conv2, relu(), pool2()),
                nn.Sequential(net.conv3, relu(), pool2()), flat(),
                nn.Sequential(net.fc1, relu()), nn.Sequential(net.fc2, relu()), net.fc3]
    if name == "lenet":
        return [nn.Sequential(net.conv1, pool2(), relu()), nn.Sequential(net.conv2, relu()),
                net.conv2_drop, pool2(), flat(), nn.Sequential(net.fc1, relu()),
                nn.Dropout(0.5), net.fc2]
    if name == "vgg16":
        units = []
        for i in net.plan:
            units += [pool2()] if i is None else [getattr(net, "conv%d" % i),
                                                  nn.Sequential(getattr(net, "bn%d" % i), relu())]
        return units + [flat(), net.fc]
    return [net.conv1, nn.Sequential(net.bn1, relu()), net.layer1, net.layer2, net.layer3,
            net.layer4, nn.Sequential(nn.AdaptiveAvgPool2d(1), flat()), net.fc]


def make_pipe(name, net, stages, micro_batches):
    """PyTorch 1.13's GPipe (torch.distributed.pipeline.sync.Pipe) over
    `stages` partitions cut by parameter count as cohort cuts them. Pipe runs in
    one process and needs the RPC framework; on CPU every partition shares one
    worker thread, so partitions take turns rather than overlap."""
    import torch.nn as nn
    from torch.distributed import rpc
    from torch.distributed.pipeline.sync import Pipe
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    rpc.init_rpc("pipe", rank=0, world_size=1)
    units = model_units(name, net)
    if stages > len(units):
        die("--pipe-stages %d: %s has only %d layers to place" % (stages, name, len(units)))
    counts = [sum(p.numel() for p in u.parameters()) for u in units]
    total, running, cuts = float(sum(counts)), 0.0, [0]
    for i, c in enumerate(counts):  # as parallel/stages.cpp: cut where the total passes s/K
        if len(cuts) == stages:
            break
        running += c
        left, needed = len(units) - (i + 1), stages - len(cuts)
        if left < needed:
            break
        if running >= total * len(cuts) / stages or left == needed:
            cuts.append(i + 1)
    cuts.append(len(units))
    parts = [nn.Sequential(*units[cuts[k]:cuts[k + 1]]) for k in range(stages)]
    log("pipe: %d partitions at layers %s, %d micro-batches" % (stages, cuts, micro_batches))
    return Pipe(nn.Sequential(*parts), chunks=micro_batches, checkpoint="never")


def cmd_train(args):
    if args.model not in MODELS:
        die("unknown model '%s' (known: %s)" % (args.model, ", ".join(MODELS)))
    for name in ("batch", "threads", "epochs", "world", "repeat", "pipe_stages",
                 "micro_batches"):
        if getattr(args, name) < 1:
            die("--%s must be >= 1 (got %d)" % (name.replace("_", "-"), getattr(args, name)))
    if args.limit < 0:
        die("--limit must be >= 0 (got %d)" % args.limit)
    if args.pipe_stages > 1 and args.world > 1:
        die("--pipe-stages runs in one process (Pipe); it does not combine with --world")
    if args.pipe_stages > 1 and args.batch % args.micro_batches:
        die("--micro-batches %d does not divide --batch %d" % (args.micro_batches, args.batch))
    set_thread_env(args.threads)
    a = {k: getattr(args, k) for k in ("model", "batch", "repeat", "epochs", "limit", "data",
                                         "threads", "seed", "pipe_stages", "micro_batches")}
    a["data_dir"] = args.data_dir
    if args.world == 1:
        import queue
        q = queue.SimpleQueue()
        train_worker(0, 1, 0, a, q)
    else:
        import torch.multiprocessing as mp
        q = mp.get_context("spawn").SimpleQueue()
        mp.start_processes(train_worker, args=(args.world, free_port(), a, q),
                           nprocs=args.world, join=True, start_method="spawn")
    if q.empty():
        die("rank 0 reported no summary", code=1)
    print(json.dumps(q.get()), flush=True)


def add_train_parser(sub):
    p = sub.add_parser("train", help="train like `cohort train` and time epochs")
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--data", default="fashion-mnist")
    p.add_argument("--data-dir", default=FASHION_DIR)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pipe-stages", type=int, default=1,
                   help="> 1: train through Pipe (GPipe) with this many partitions")
    p.add_argument("--micro-batches", type=int, default=4,
                   help="Pipe's chunks per batch (with --pipe-stages)")


def main(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch peer for cohort")
    sub = ap.add_subparsers(dest="cmd")
    sub.required = True

    p = sub.add_parser("count", help="print trainable parameter count")
    p.add_argument("--model", required=True)

    p = sub.add_parser("step", help="time training steps on synthetic data")
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)

    p = sub.add_parser("grads", help="gradients of mean cross-entropy loss")
    p.add_argument("--model", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--batch-file", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=1)

    p = sub.add_parser("allreduce-bench",
                       help="time gloo all_reduce of float32 tensors")
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--sizes", required=True, help="bytes, comma-separated")
    p.add_argument("--iters", type=int, default=20,
                   help="iterations per timed batch (the most, with --seconds)")
    p.add_argument("--repeats", type=int, default=5,
                   help="timed batches; the fastest counts")
    p.add_argument("--seconds", type=float, default=0,
                   help="if > 0, size batches to about this much time per size")

    add_train_parser(sub)

    args = ap.parse_args(argv)
    if args.cmd == "train":
        cmd_train(args)
        return
    if args.cmd == "count":
        if args.model not in MODELS:
            die("unknown model '%s' (known: %s)"
                % (args.model, ", ".join(MODELS)))
        set_thread_env(1)
        cmd_count(args)
    elif args.cmd == "step":
        cmd_step(args)
    elif args.cmd == "allreduce-bench":
        cmd_allreduce_bench(args)
    elif args.cmd == "grads":
        set_thread_env(max(1, args.threads))
        cmd_grads(args)


if __name__ == "__main__":
    main()
