"""PyTorch peer for cohort's benchmarks and gradient cross-checks.

Run with Debian's interpreter (/usr/bin/python3, python3-torch), e.g.

    /usr/bin/python3 bench/peers/pytorch_peer count --model mnist-small
    /usr/bin/python3 bench/peers/pytorch_peer step --model mnist-small --batch 128 --threads 1
    /usr/bin/python3 bench/peers/pytorch_peer step --model mnist-small --batch 128 --threads 1 --world 2
    /usr/bin/python3 bench/peers/pytorch_peer grads --model lenet \\
        --weights W.safetensors --batch-file X.safetensors --out G.safetensors
    /usr/bin/python3 bench/peers/pytorch_peer allreduce-bench --world 2 \\
        --sizes 4,65536,1048576 --iters 20
    /usr/bin/python3 bench/peers/pytorch_peer train --model mnist-small \\
        --batch 128 --repeat 1 --epochs 2 --limit 6000 --threads 1 --world 2
    /usr/bin/python3 bench/peers/pytorch_peer train --model mnist-large \\
        --data synthetic --limit 512 --threads 2 --pipe-stages 2 --micro-batches 4

The models mirror the ones cohort builds, with identical parameter names
(state_dict keys). Only stdout carries the result (one JSON line); everything
else goes to stderr.

Modules: cli (flags and checks) -> commands -> train (the one training loop,
for step and train), grads, allreduce; beside them models + nets (the
networks), data, dist (gloo ranks), stages (Pipe), safetensors_f32.
"""
