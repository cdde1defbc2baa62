#!/usr/bin/env python3
"""PyTorch's ways of loading a torch.save checkpoint, timed: the peers of
torch.LoadHost and torch.Load (bench/loadbench).

  python3 bench/torch_peers.py FILE [--device cpu|cuda:0] [--repeats N] [--json]

cpu: torch.load(FILE, weights_only=True). cuda:0: torch.load(FILE,
map_location="cuda:0", weights_only=True), the usual way ("map"), and
torch.load(FILE, mmap=True, weights_only=True) then .to("cuda:0") of each
tensor ("mmap"), the fastest PyTorch offers; torch.cuda.synchronize()
ends each. Each repetition frees what it loaded before the next; CUDA is
initialised before the first. Prints the best and median of each way, or
with --json a line each {"name", "seconds", "best_seconds",
"median_seconds", "gb_per_s", "median_gb_per_s"} as kvik bench --json
does.

  python3 bench/torch_peers.py --make FILE --gb N

writes a state dict of about N GB: bfloat16 tensors of 4096 x 4096
(random normal values) and a float32 bias of 4096 after each.

  python3 bench/torch_peers.py FILE --convert DST

converts FILE into the safetensors file DST as Hugging Face's
conversion does (torch.load, then safetensors.torch.save_file with the
metadata {"format": "pt"}), the peer of kvik cp FILE DST, and prints
the seconds of each step.
"""
import argparse
import json
import os
import statistics
import time

import torch


def make(path, gb):
    g = torch.Generator().manual_seed(3)
    sd = {}
    n = max(1, int(gb * 1e9) // (4096 * 4096 * 2))
    for i in range(n):
        sd[f"layers.{i}.weight"] = torch.randn((4096, 4096), generator=g).to(torch.bfloat16)
        sd[f"layers.{i}.bias"] = torch.randn((4096,), generator=g)
    torch.save(sd, path)
    print(f"wrote {path}: {len(sd)} tensors, {os.path.getsize(path) / 1e9:.2f} GB")


def timed(name, load, device, size, repeats):
    secs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = load()
        if device != "cpu":
            torch.cuda.synchronize()
        secs.append(time.perf_counter() - t0)
        del out
        if device != "cpu":
            torch.cuda.empty_cache()
    best, med = min(secs), statistics.median(secs)
    return {"name": name, "seconds": secs, "best_seconds": best, "median_seconds": med,
            "gb_per_s": size / best / 1e9, "median_gb_per_s": size / med / 1e9}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--make", action="store_true")
    ap.add_argument("--gb", type=float, default=2)
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda:0")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--convert", metavar="DST")
    a = ap.parse_args()
    if a.make:
        make(a.file, a.gb)
        return
    if a.convert:
        from safetensors.torch import save_file
        t0 = time.perf_counter()
        sd = torch.load(a.file, weights_only=True)
        t1 = time.perf_counter()
        save_file(sd, a.convert, metadata={"format": "pt"})
        t2 = time.perf_counter()
        print(f"python torch.load {t1 - t0:.2f} s + save_file {t2 - t1:.2f} s = {t2 - t0:.2f} s")
        return
    size = os.path.getsize(a.file)
    if a.device == "cpu":
        ways = {"torch.load": lambda: torch.load(a.file, weights_only=True)}
    else:
        torch.zeros(1, device=a.device)
        torch.cuda.synchronize()
        ways = {
            f"torch.load(map_location={a.device})": lambda: torch.load(a.file, map_location=a.device, weights_only=True),
            f"torch.load(mmap=True) + .to({a.device})": lambda: {
                k: v.to(a.device) for k, v in torch.load(a.file, mmap=True, weights_only=True).items()},
        }
    for name, load in ways.items():
        r = timed(name, load, a.device, size, a.repeats)
        if a.json:
            print(json.dumps(r))
        else:
            print("%s: %.2f GB, %d repetitions; best %.3f s %.2f GB/s, median %.3f s %.2f GB/s"
                  % (name, size / 1e9, a.repeats, r["best_seconds"], r["gb_per_s"], r["median_seconds"], r["median_gb_per_s"]))


if __name__ == "__main__":
    main()
