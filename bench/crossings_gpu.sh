#!/bin/bash
# How bytes reach the GPU, outside Go (issues 40 and 41), in one GPU-machine
# call of about two minutes on one GPU:
#   - bench/probes/copy2d.c: 1 MiB chunks of 512 B, 2 KiB and 8 KiB rows
#     copied into a 64 KiB-pitched device array: 2D copies from pinned
#     memory, flat copies (the PCIe ceiling), flat copies then 2D copies
#     within device memory; 1 and 2 streams;
#   - bench/probes/reg_split.c on an 8 GB file in /dev/shm: slices mapped,
#     registered, copied and unregistered by T threads, everything timed
#     (16, 64, 256 MiB slices; 1..16 threads), the registration alone, and
#     without MAP_POPULATE;
#   - bench/probes/pread_steady.c on the same file: the staged path (pread
#     into pinned buffers, then copied) and a mapping registered once
#     (outside the clock), 16 and 32 threads.
# GPUS (default 1) GPUs for the two file probes. Logs under $OUT, a
# summary last. Nothing to build here: gcc builds the probes there.
#   bash bench/crossings_gpu.sh
set -u
R=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out} GPUS=${GPUS:-1}
mkdir -p "$OUT"
B=$(mktemp -d)
F=/dev/shm/crossings.bin
trap 'rm -rf "$B" "$F"' EXIT
for p in copy2d reg_split pread_steady; do
  gcc -O2 -pthread "$R/bench/probes/$p.c" -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcuda -o "$B/$p" || exit 1
done
echo "=== copy2d" | tee "$OUT/copy2d.txt"
C2_STREAMS=1,2 "$B/copy2d" 2>&1 | tee -a "$OUT/copy2d.txt"
dd if=/dev/urandom of="$F" bs=64M count=1 status=none
python3 - "$F" <<'PY'
import sys, os
p = sys.argv[1]
blk = open(p, 'rb').read()
with open(p, 'ab') as f:
    for _ in range(127):
        f.write(blk)
print("file", os.path.getsize(p) / 1e9, "GB")
PY
echo "=== reg_split (GPUs=$GPUS)" | tee "$OUT/reg_split.txt"
RS_GPUS=$GPUS "$B/reg_split" "$F" 2>&1 | tee -a "$OUT/reg_split.txt"
RS_GPUS=$GPUS RS_COPY=0 RS_SLICE_MIB=64 RS_THREADS=1,4,16 "$B/reg_split" "$F" 2>&1 | tee -a "$OUT/reg_split.txt"
RS_GPUS=$GPUS RS_POPULATE=0 RS_SLICE_MIB=64 RS_THREADS=4,16 "$B/reg_split" "$F" 2>&1 | tee -a "$OUT/reg_split.txt"
echo "=== pread_steady (GPUs=$GPUS)" | tee "$OUT/pread_steady.txt"
PS_THREADS=16,32 PS_GPUS=$GPUS PS_FDS=own PS_MODES=pread,mmap "$B/pread_steady" "$F" 2>&1 | tee -a "$OUT/pread_steady.txt"
echo "=== summary"
grep -h "GB/s" "$OUT"/copy2d.txt | sort -t= -k2 | head -40
grep -h "best" "$OUT"/reg_split.txt "$OUT"/pread_steady.txt
