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

GPT-2 (gpt2-tiny, gpt2, gpt2-medium, gpt2-large; token models) takes
--vocab V and --seq T (context; step's sequence length) in count, step, grads
and hf-export; train takes image models only:

    /usr/bin/python3 bench/peers/pytorch_peer count --model gpt2 --vocab 50257 --seq 1024
    /usr/bin/python3 bench/peers/pytorch_peer step --model gpt2-tiny --batch 8 --threads 2
    /usr/bin/python3 bench/peers/pytorch_peer grads --model gpt2-tiny \
        --weights W.safetensors --batch-file X.safetensors --out G.safetensors
    /usr/bin/python3 bench/peers/pytorch_peer hf-export --model gpt2 \
        --weights W.safetensors --out model.safetensors [--no-attn-bias]

A token batch file holds `images` = ids as f32 {B, T} and `labels` = the next
tokens as f32 {B*T}; step reports sequences/s (also as images_per_second) and
tokens_per_second. Parameter counts (tied head): gpt2-tiny 220,544 (vocab 256,
context 64), gpt2 124,439,808, gpt2-medium 354,823,168, gpt2-large 774,030,080
(vocab 50257, context 1024). Checked by hand: grads' fp32 loss on gpt2-tiny at
init is ~log(256) and equals an independent numpy forward over the hf-export
file (which thus has the Conv1D layout right); its gradients, wte's included,
match central differences in float64 to ~2e-6; hf-export of gpt2 writes 160
tensors (148 parameters, 12 masks), 548,090,880 data bytes: the ~548 MB of
the Hub's gpt2 model.safetensors (not compared tensor by tensor: no network).

The models mirror the ones cohort builds, with identical parameter names
(state_dict keys). Only stdout carries the result (one JSON line); everything
else goes to stderr.

Modules: cli (flags and checks) -> commands -> train (the one training loop,
for step and train), grads, allreduce, hfexport; beside them models + nets +
gpt2 (the networks), data, dist (gloo ranks), stages (Pipe), safetensors_f32.
"""
