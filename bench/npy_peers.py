#!/usr/bin/env python3
"""The NumPy ways of loading a .npy file or a .npz archive, timed: the
peers of npy.LoadHost and npy.Load, npy.LoadNpzHost and npy.LoadNpz
(bench/loadbench).

  python3 bench/npy_peers.py FILE [--device cpu|cuda:0] [--repeats N] [--json]

cpu: numpy.load(FILE) (of a .npz, every array of it); cuda:0:
torch.from_numpy(...).to("cuda:0") of each, then torch.cuda.synchronize(). Each repetition frees what it loaded before
the next; CUDA is initialised before the first. Prints the best and median
times, or with --json {"name", "seconds", "best_seconds",
"median_seconds", "gb_per_s", "median_gb_per_s"} as kvik bench --json does.

  python3 bench/npy_peers.py --make FILE --gb N [--members K] [--compressed]

writes a float32 array of about N GB (rows of 4096 random values) to FILE;
a FILE named .npz gets K arrays of N/K GB each (numpy.savez, or with
--compressed numpy.savez_compressed).
"""
import argparse
import json
import os
import statistics
import time

import numpy as np


def make(path, gb, members=1, compressed=False):
    if path.endswith(".npz"):
        arrays = {}
        for k in range(members):
            rows = max(1, int(gb / members * 1e9) // (4096 * 4))
            arrays["a%d" % k] = np.random.default_rng(k).standard_normal((rows, 4096), dtype=np.float32)
        (np.savez_compressed if compressed else np.savez)(path, **arrays)
        print(f"wrote {path}: {members} float32 arrays, {os.path.getsize(path) / 1e9:.2f} GB")
        return
    rows = max(1, int(gb * 1e9) // (4096 * 4))
    a = np.empty((rows, 4096), dtype=np.float32)
    rng = np.random.default_rng(1)
    step = 16384  # rows per block: 256 MiB of random values at a time
    for r in range(0, rows, step):
        a[r:r + step] = rng.standard_normal((min(step, rows - r), 4096), dtype=np.float32)
    np.save(path, a)
    print(f"wrote {path}: float32 {a.shape}, {os.path.getsize(path) / 1e9:.2f} GB")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--make", action="store_true")
    ap.add_argument("--gb", type=float, default=4)
    ap.add_argument("--members", type=int, default=1)
    ap.add_argument("--compressed", action="store_true")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda:0")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.make:
        make(a.file, a.gb, a.members, a.compressed)
        return
    npz = a.file.endswith(".npz")
    torch = None
    if a.device == "cpu":
        name = "numpy.load"

        def load():
            if npz:
                with np.load(a.file) as f:
                    return [f[k] for k in f.files]
            return np.load(a.file)
    else:
        import torch
        torch.zeros(1, device=a.device)
        torch.cuda.synchronize()
        name = f"numpy.load + torch .to({a.device})"

        def load():
            if npz:
                with np.load(a.file) as f:
                    t = [torch.from_numpy(f[k]).to(a.device) for k in f.files]
            else:
                t = torch.from_numpy(np.load(a.file)).to(a.device)
            torch.cuda.synchronize()
            return t
    size = os.path.getsize(a.file)
    secs = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        out = load()
        secs.append(time.perf_counter() - t0)
        del out
        if a.device != "cpu":
            torch.cuda.empty_cache()
    best, med = min(secs), statistics.median(secs)
    r = {"name": name, "seconds": secs, "best_seconds": best, "median_seconds": med,
         "gb_per_s": size / best / 1e9, "median_gb_per_s": size / med / 1e9}
    if a.json:
        print(json.dumps(r))
    else:
        print("%s: %.2f GB, %d repetitions; best %.3f s %.2f GB/s, median %.3f s %.2f GB/s"
              % (name, size / 1e9, a.repeats, best, r["gb_per_s"], med, r["median_gb_per_s"]))


if __name__ == "__main__":
    main()
