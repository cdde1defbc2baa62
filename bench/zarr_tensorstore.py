#!/usr/bin/env python3
"""TensorStore, the peer of bench/zarrbench (issue 40): reads the v3
arrays zarrbench -keep left in DIR (DIR/NAME.zarr, the directory kvik
reads) whole into host memory with TensorStore, then copies them to the
GPU with torch (pinned: no; as a user would), best of REPS, and prints
"RESULT ts_host_NAME GB/s" and "RESULT ts_gpu_NAME GB/s". TensorStore's
cache pool is off (total_bytes_limit 0), so that no read is served from
an earlier one's cache. The CRC-32 of what it read is compared with
zarrbench's (KVIK_CRC32, hex, when set): an array read differently gets
no RESULT. Usage: zarr_tensorstore.py DIR REPS NAME..."""
import importlib.metadata
import os
import sys
import time
import zlib

import tensorstore as ts
import torch


def best(reps, f):
    b = None
    for _ in range(reps):
        t = time.perf_counter()
        f()
        d = time.perf_counter() - t
        b = d if b is None or d < b else b
    return b


def version(mod, name):
    v = getattr(mod, "__version__", None)
    if v is None:
        try:
            v = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            v = "?"
    return v


def main():
    root, reps, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    want = os.environ.get("KVIK_CRC32", "").lower()
    print("tensorstore", version(ts, "tensorstore"), "torch", version(torch, "torch"), torch.cuda.get_device_name(0))
    for name in names:
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": f"{root}/{name}.zarr"},
                "context": {"cache_pool": {"total_bytes_limit": 0}}}
        arr = ts.open(spec, read=True).result()
        host = arr.read().result()
        size = host.nbytes
        crc = f"{zlib.crc32(host.tobytes()):08x}"
        ok = not want or crc == want
        print(f"{name}: {arr.dtype} {arr.shape}, CRC32 {crc}" + ("" if ok else f" DIFFERS from zarrbench's {want}: no RESULT"))
        del host
        if not ok:
            continue
        h = best(reps, lambda: arr.read().result())

        def to_gpu():
            t = torch.from_numpy(arr.read().result()).to("cuda")
            torch.cuda.synchronize()
            return t

        g = best(reps, to_gpu)
        print(f"RESULT ts_host_{name} {size / h / 1e9:.3f}")
        print(f"RESULT ts_gpu_{name} {size / g / 1e9:.3f}")


if __name__ == "__main__":
    main()
