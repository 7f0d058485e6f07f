#!/usr/bin/python3
"""Entry point: `python3 bench/peers/pytorch_peer ARGS` (the folder) or
`python3 -m pytorch_peer ARGS` from bench/peers."""

import os
import sys

if __package__ in (None, ""):
    # Run as a folder: import the package from its parent, and keep this
    # folder (whose module names are generic: data, dist, train) off sys.path.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from pytorch_peer.cli import main  # noqa: E402

main()
