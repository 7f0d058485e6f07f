"""safetensors files, F32 (and I64, PyTorch's batch-norm num_batches_tracked),
read and written by hand: Debian has no python3-safetensors.

Layout: u64 little-endian header length, a JSON header mapping each name to
{dtype, shape, data_offsets}, padded with spaces to 8 bytes, then the data.
"""

import json
import struct

import numpy as np

from .common import die


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, numpy array) or dict; stored as F32 little-endian
    (integer arrays as I64), in that order. metadata: optional str -> str, the
    header's __metadata__."""
    items = list(tensors.items()) if isinstance(tensors, dict) else list(tensors)
    header, arrays, off = {}, [], 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name, arr in items:
        integer = np.issubdtype(np.asarray(arr).dtype, np.integer)
        a = np.asarray(arr, dtype="<i8" if integer else "<f4")  # no copy if already so
        if not a.flags.c_contiguous:  # (ascontiguousarray would make a scalar [1])
            a = a.copy(order="C")
        header[name] = {"dtype": "I64" if integer else "F32", "shape": list(a.shape),
                        "data_offsets": [off, off + a.nbytes]}
        arrays.append(a)
        off += a.nbytes
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for a in arrays:
            f.write(a.data)  # a's buffer, not a bytes copy (gpt2-large is 3 GB)


def read_safetensors(path):
    """Returns dict name -> numpy array: float32 for F32, int64 for I64."""
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
        kinds = {"F32": "<f4", "I64": "<i8"}
        if info.get("dtype") not in kinds:
            die("%s: tensor '%s' has dtype %s, only F32 and I64 are supported"
                % (path, name, info.get("dtype")))
        kind = np.dtype(kinds[info["dtype"]])
        b, e = info["data_offsets"]
        shape = tuple(int(s) for s in info["shape"])
        n = 1
        for s in shape:
            n *= s
        if e - b != kind.itemsize * n or e > len(data) or b < 0:
            die("%s: tensor '%s' offsets [%d,%d] do not match shape %s"
                % (path, name, b, e, list(shape)))
        out[name] = np.frombuffer(data[b:e], dtype=kind).reshape(shape).copy()
    return out
