#!/usr/bin/env python3
"""Split a safetensors file into N files, one per GPU, each holding the
contiguous share of its tensors that safetensors.Load's balanced placement
gives that GPU (a tensor goes to share min((bytes before it + half its
size) * N / total, N - 1)), so that N processes can each load the share
one process loads onto that GPU (bench/gpus_gpu.sh's two-process anchor).

    python3 bench/split_balanced.py FILE N PREFIX   # writes PREFIX0.safetensors ...
"""
import json
import struct
import sys


def main():
    src, n, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(src, "rb") as f:
        hlen = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(hlen))
    meta = header.pop("__metadata__", None)
    tensors = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    total = sum(v["data_offsets"][1] - v["data_offsets"][0] for _, v in tensors)
    shares = [[] for _ in range(n)]
    cum = 0
    for name, v in tensors:
        size = v["data_offsets"][1] - v["data_offsets"][0]
        slot = min((cum + size // 2) * n // total, n - 1) if total else 0
        shares[slot].append((name, v))
        cum += size
    for i, share in enumerate(shares):
        out = {} if meta is None else {"__metadata__": meta}
        off = 0
        for name, v in share:
            b, e = v["data_offsets"]
            out[name] = {"dtype": v["dtype"], "shape": v["shape"], "data_offsets": [off, off + e - b]}
            off += e - b
        hb = json.dumps(out, separators=(",", ":")).encode()
        hb += b" " * (-len(hb) % 8)
        first = share[0][1]["data_offsets"][0] if share else 0
        with open(src, "rb") as f, open(f"{prefix}{i}.safetensors", "wb") as o:
            o.write(struct.pack("<Q", len(hb)) + hb)
            f.seek(8 + hlen + first)
            left = off
            while left:
                chunk = f.read(min(left, 64 << 20))
                if not chunk:
                    sys.exit(f"{src}: short read")
                o.write(chunk)
                left -= len(chunk)
        print(f"{prefix}{i}.safetensors: {len(share)} tensors, {off / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
