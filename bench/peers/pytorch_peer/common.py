"""Logging, errors and argument checks shared by the peer's commands.

Only stdout carries a command's result (one JSON line); everything here goes
to stderr. Nothing here imports torch: the thread variables must be set first.
"""

import os
import sys


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def die(msg, code=2):
    # "pytorch_peer: error" is what src/bench/strategies.cpp looks for in a log.
    log("pytorch_peer: error: " + msg)
    sys.exit(code)


def set_thread_env(threads):
    # Must happen before torch is imported so intra-op pools are sized right;
    # spawned ranks inherit it.
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[k] = str(threads)


def require_at_least(args, names, low=1):
    """Dies on the first of args' `names` (attribute names) below `low`."""
    for name in names:
        if getattr(args, name) < low:
            die("--%s must be >= %d (got %d)"
                % (name.replace("_", "-"), low, getattr(args, name)))
