#!/usr/bin/env python3
"""The Python path to the GPU that a GGUF user has today, timed: gguf-py's
GGUFReader (a NumPy memmap of the file, its header parsed in Python) and,
per tensor, torch.from_numpy(tensor.data).cuda(), then one synchronize.

    GGUF_PY=/path/to/gguf-py python3 bench/gguf_peers.py FILE [--repeats N] [--host] [--json]

With --host, the tensors go into host memory instead, the peer of
gguf.LoadHost (bench/loadbench): GGUFReader and, per tensor, a copy of its
bytes out of the memmap (np.array), which reads them from the file.

GGUF_PY is a folder holding gguf-py's gguf/ package (see
gguf/testdata/SOURCE.md); without it, an installed gguf package is used.
Each repetition frees what it loaded (and empties PyTorch's cache) before
the next; CUDA is initialised before the first. Prints the best and median
times, or with --json {"name", "seconds", "best_seconds",
"median_seconds", "gb_per_s", "median_gb_per_s"} as kvik bench --json does.
"""
import argparse
import json
import os
import statistics
import sys
import time
import warnings

if os.environ.get("GGUF_PY"):
    sys.path.insert(0, os.environ["GGUF_PY"])

import numpy as np  # noqa: E402
import torch  # noqa: E402
from gguf import GGUFReader  # noqa: E402


def load(path):
    """Every tensor of path on cuda:0, as a user of gguf-py does it."""
    r = GGUFReader(path)
    out = [torch.from_numpy(np.asarray(t.data)).cuda() for t in r.tensors]
    torch.cuda.synchronize()
    return out


def load_host(path):
    """Every tensor of path in host memory, read out of gguf-py's memmap."""
    r = GGUFReader(path)
    return [np.array(t.data) for t in r.tensors]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--host", action="store_true", help="into host memory (NumPy arrays)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")  # from_numpy warns that the memmap is read-only
    if not a.host:
        torch.zeros(1, device="cuda:0")
        torch.cuda.synchronize()
    size = os.path.getsize(a.file)
    secs = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        out = load_host(a.file) if a.host else load(a.file)
        secs.append(time.perf_counter() - t0)
        del out
        torch.cuda.empty_cache()
    best, med = min(secs), statistics.median(secs)
    name = "gguf-py GGUFReader + np.array per tensor" if a.host else "gguf-py GGUFReader + torch .cuda() per tensor"
    r = {"name": name, "seconds": secs,
         "best_seconds": best, "median_seconds": med,
         "gb_per_s": size / best / 1e9, "median_gb_per_s": size / med / 1e9}
    if a.json:
        print(json.dumps(r))
    else:
        print("%s: %.2f GB, %d repetitions; best %.3f s %.2f GB/s, median %.3f s %.2f GB/s"
              % (r["name"], size / 1e9, a.repeats, best, r["gb_per_s"], med, r["median_gb_per_s"]))


if __name__ == "__main__":
    main()
