#!/bin/bash
# torch.save checkpoints in one GPU-machine call: PyTorch writes, on
# /dev/shm (page cache), a state dict of GB (default 2) of bfloat16
# weights (bench/torch_peers.py --make); bench/loadbench times torch.Load
# onto GPU 0 and torch.LoadHost into host memory against the plain read
# of the file, and bench/torch_peers.py torch.load (map_location="cuda:0",
# and mmap=True then .to("cuda:0"); into host memory) of the same file,
# REPEATS (default 5) each.
#
# Build here into the git-ignored folder G:
#   CGO_ENABLED=0 go build -ldflags=-s -o G/ ./bench/loadbench
# then carry G and run, there: bash bench/torch_gpu.sh G
set -u
G=$(cd "$1" && pwd)
R=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
GB=${GB:-2}
REPEATS=${REPEATS:-5}
F=/dev/shm/kvik-torch.pt
mkdir -p "$OUT"
trap 'rm -f "$F"' EXIT
python3 "$R/bench/torch_peers.py" --make "$F" --gb "$GB" | tee "$OUT/make.txt"
for mem in device host; do
  "$G/loadbench" -memory "$mem" -repeats "$REPEATS" "$F" >> "$OUT/loadbench.jsonl" 2>> "$OUT/loadbench.txt"
done
python3 "$R/bench/torch_peers.py" "$F" --device cuda:0 --repeats "$REPEATS" --json >> "$OUT/peers.jsonl"
python3 "$R/bench/torch_peers.py" "$F" --device cpu --repeats "$REPEATS" --json >> "$OUT/peers.jsonl"
cat "$OUT/loadbench.txt"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
kvik = {k["memory"]: k for k in map(json.loads, open(out + "/loadbench.jsonl"))}
for p in map(json.loads, open(out + "/peers.jsonl")):
    k = kvik["host" if p["name"] == "torch.load" else "device"]
    load = k["results"][1]
    print("%-40s %6.2f GB/s (median %5.2f); kvik %s %6.2f (%5.2f): %5.1fx (median %5.1fx)" % (
        p["name"], p["gb_per_s"], p["median_gb_per_s"], load["name"], load["gb_per_s"], load["median_gb_per_s"],
        load["gb_per_s"] / p["gb_per_s"], load["median_gb_per_s"] / p["median_gb_per_s"]))
PY
