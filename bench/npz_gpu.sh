#!/bin/bash
# .npz loads in one GPU-machine call: NumPy writes, on /dev/shm (page
# cache), GB (default 2) of float32 in 8 arrays as numpy.savez (stored)
# and numpy.savez_compressed (deflated; CGB, default 1, of them: its
# compression takes a core a minute per GB; CGB=0: none), and one .npy
# of GB;
# bench/loadbench times npy.LoadNpz / npy.Load onto GPU 0 and
# LoadNpzHost / LoadHost into host memory against the plain read of the
# same file (the ceiling), and bench/npy_peers.py numpy.load (+ torch's
# copy to cuda:0) of the same files, REPEATS (default 5) each.
#
# Build here into the git-ignored folder G:
#   CGO_ENABLED=0 go build -ldflags=-s -o G/ ./bench/loadbench
# and put libdeflate.so.0 there (Debian's libdeflate0: the machine has
# none, and deflated members inflate through it where it loads); then
# carry G and run, there: bash bench/npz_gpu.sh G
set -u
G=$(cd "$1" && pwd)
R=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
GB=${GB:-2}
CGB=${CGB:-1}
REPEATS=${REPEATS:-5}
D=/dev/shm/kvik-npz
mkdir -p "$OUT" "$D"
[ -f "$G/libdeflate.so.0" ] && export KVIK_LIBDEFLATE_PATH=$G/libdeflate.so.0
echo "libdeflate: ${KVIK_LIBDEFLATE_PATH:-none (klauspost/compress inflates)}" | tee "$OUT/inflate.txt"
trap 'rm -rf "$D"' EXIT
python3 "$R/bench/npy_peers.py" --make "$D/stored.npz" --gb "$GB" --members 8 | tee "$OUT/make.txt"
files="stored.npz deflated.npz one.npy"
if [ "$CGB" = 0 ]; then
  files="stored.npz one.npy" # CGB=0: no deflated archive
else
  python3 "$R/bench/npy_peers.py" --make "$D/deflated.npz" --gb "$CGB" --members 8 --compressed | tee -a "$OUT/make.txt"
fi
python3 "$R/bench/npy_peers.py" --make "$D/one.npy" --gb "$GB" | tee -a "$OUT/make.txt"
for f in $files; do
  for mem in device host; do
    "$G/loadbench" -memory "$mem" -repeats "$REPEATS" "$D/$f" >> "$OUT/loadbench.jsonl" 2>> "$OUT/loadbench.txt"
  done
  for dev in cuda:0 cpu; do
    python3 "$R/bench/npy_peers.py" "$D/$f" --device "$dev" --repeats "$REPEATS" --json >> "$OUT/peers.jsonl"
  done
done
cat "$OUT/loadbench.txt"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
kvik = [json.loads(l) for l in open(out + "/loadbench.jsonl")]
peers = [json.loads(l) for l in open(out + "/peers.jsonl")]
for i, k in enumerate(kvik):
    p = peers[i]  # the same file and memory, in the same order
    load = k["results"][1]
    print("%-28s %-6s %-18s %6.2f GB/s (median %5.2f); %-34s %6.2f (%5.2f); kvik / NumPy %5.2fx (median %5.2fx); load / read %4.2f" % (
        k["name"].split("/")[-1], k["memory"], load["name"], load["gb_per_s"], load["median_gb_per_s"], p["name"], p["gb_per_s"],
        p["median_gb_per_s"], load["gb_per_s"] / p["gb_per_s"], load["median_gb_per_s"] / p["median_gb_per_s"],
        load["gb_per_s"] / k["results"][0]["gb_per_s"]))
PY
