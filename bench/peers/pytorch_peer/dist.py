"""Ranks: the one place the peer sets up gloo.

run_ranks(worker, world, a) calls worker(rank, world, a, results) on `world`
ranks, each with a["threads"] intra-op threads, and returns what the ranks put
on `results`. One rank runs in this process with no process group; more are
spawned, and each joins one gloo group on 127.0.0.1 before worker runs.

Started by a launcher as one rank of a group across hosts (torchrun's
variables RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set; GLOO_SOCKET_IFNAME
names the interface), this process is that rank alone: it joins the group at
MASTER_ADDR, and rank 0 returns every rank's results; the others return None
(their command prints nothing). scripts/bench_cluster.sh starts DDP so, one
process per network namespace.
"""

import os
import queue
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from .common import die, set_thread_env


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def gloo_rank(rank, world, port, worker, a, results):
    """A spawned rank: threads, then the gloo group around worker."""
    set_thread_env(a["threads"])
    torch.set_num_threads(a["threads"])
    os.environ["GLOO_SOCKET_IFNAME"] = os.environ.get("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            init_method="tcp://127.0.0.1:%d" % port)
    try:
        worker(rank, world, a, results)
    finally:
        dist.destroy_process_group()


def launched_rank():
    """This process's rank when a launcher started it as one of a group."""
    if "RANK" in os.environ and "MASTER_ADDR" in os.environ:
        return int(os.environ["RANK"])
    return None


def run_launched(worker, rank, world, a):
    if int(os.environ.get("WORLD_SIZE", "-1")) != world:
        die("WORLD_SIZE=%s but --world %d" % (os.environ.get("WORLD_SIZE"), world))
    torch.set_num_threads(a["threads"])
    dist.init_process_group("gloo", rank=rank, world_size=world, init_method="env://")
    try:
        results = queue.SimpleQueue()
        worker(rank, world, a, results)
        mine = []
        while not results.empty():
            mine.append(results.get())
        every = [None] * world
        dist.all_gather_object(every, mine)
    finally:
        dist.destroy_process_group()
    return [r for got in every for r in got] if rank == 0 else None


def run_ranks(worker, world, a):
    rank = launched_rank()
    if rank is not None:
        return run_launched(worker, rank, world, a)
    if world == 1:
        results = queue.SimpleQueue()
        torch.set_num_threads(a["threads"])
        worker(0, 1, a, results)
    else:
        results = mp.get_context("spawn").SimpleQueue()
        mp.start_processes(gloo_rank, args=(world, free_port(), worker, a, results),
                           nprocs=world, join=True, start_method="spawn")
    out = []
    while not results.empty():
        out.append(results.get())
    return out
