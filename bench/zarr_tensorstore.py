#!/usr/bin/env python3
"""TensorStore, the peer of bench/zarrbench (issue 40): reads the v3
arrays zarrbench -keep left in DIR (DIR/NAME.zarr) whole into host memory
with TensorStore, then copies them to the GPU with torch (pinned: no;
as a user would), best of REPS, and prints "RESULT ts_host_NAME GB/s",
"RESULT ts_gpu_NAME GB/s" and the CRC-32 of what it read (zarrbench
prints the data's). Usage: zarr_tensorstore.py DIR REPS NAME..."""
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


def main():
    root, reps, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    print("tensorstore", ts.__version__, "torch", torch.__version__, torch.cuda.get_device_name(0))
    for name in names:
        arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": f"{root}/{name}.zarr"}}).result()
        host = arr.read().result()
        size = host.nbytes
        print(f"{name}: {arr.dtype} {arr.shape}, CRC32 {zlib.crc32(host.tobytes()):08x}")
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
