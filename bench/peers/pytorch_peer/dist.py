"""Ranks on this machine: the one place the peer sets up gloo.

run_ranks(worker, world, a) calls worker(rank, world, a, results) on `world`
ranks, each with a["threads"] intra-op threads, and returns what the ranks put
on `results`. One rank runs in this process with no process group; more are
spawned, and each joins one gloo group on 127.0.0.1 before worker runs.
"""

import os
import queue
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from .common import set_thread_env


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


def run_one_rank(worker, rank, world, master, a):
    """This process as rank `rank` of a gloo group whose rank 0 listens on
    master (HOST:PORT): the caller starts one such process per rank, on its
    own host (cohort bench comm across hosts). Gloo finds its interface from
    this host's name. Returns what the rank put on `results`."""
    set_thread_env(a["threads"])
    torch.set_num_threads(a["threads"])
    results = queue.SimpleQueue()
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            init_method="tcp://" + master)
    try:
        worker(rank, world, a, results)
    finally:
        dist.destroy_process_group()
    out = []
    while not results.empty():
        out.append(results.get())
    return out


def run_ranks(worker, world, a):
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
