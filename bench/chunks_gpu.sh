#!/bin/bash
# Two GPUs from one process: does the staging chunk size bound the host
# side? In one GPU-machine call (about 4 minutes on 2x H200): the C probe
# of the staged read (bench/probes/pread_steady.c; pread into pinned
# buffers, each chunk copied to its GPU, setup outside the clock) at
# 512 KiB-4 MiB chunks, pread alone and with copies to two GPUs; then
# `kvik bench --safetensors` with the built-in chunks (2 MiB: half of a
# 4 MiB bounce buffer) and with 1 MiB and 512 KiB chunks
# (KVIKIO_BOUNCE_BUFFER_SIZE 2 and 1 MiB), taking turns, ROUNDS times.
#
# Build here into the git-ignored folder G: G/kvik
# (CGO_ENABLED=0 go build -ldflags=-s -o G/ ./cmd/kvik). There:
#   bash bench/chunks_gpu.sh G
set -u
G=$(cd "$1" && pwd)
R=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KVIKIO_COMPAT_MODE=on
L=$OUT/chunks.txt
step() { echo "=== $(date -u +%T) $*" | tee -a "$L"; }
step machine; (nvidia-smi -L; nproc) 2>&1 | tee -a "$L"
CK=/dev/shm/ckpt.safetensors
step make an 8 GB checkpoint
[ -f $CK ] || timeout 200 python3 "$R/bench/safetensors_peers.py" $CK --make --gb 8 2>&1 | tail -1 | tee -a "$L"
step "probe: chunk sizes, pread alone (GPUs=0) and copied to two GPUs, one process"
gcc -O2 -pthread "$R/bench/probes/pread_steady.c" -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcuda -o /tmp/pread_steady
for kib in 512 1024 2048 4096; do
  PS_TASK_KIB=$kib PS_THREADS=32 PS_GPUS=0,2 PS_FDS=shared timeout 60 /tmp/pread_steady $CK 2>&1 | tee -a "$L"
done
for kib in 1024 2048; do
  PS_TASK_KIB=$kib PS_THREADS=24,48 PS_GPUS=2 PS_FDS=shared timeout 60 /tmp/pread_steady $CK 2>&1 | tee -a "$L"
done
step "probe: two processes, one GPU each, 1 MiB and 2 MiB chunks"
for kib in 1024 2048; do
  (CUDA_VISIBLE_DEVICES=0 PS_TASK_KIB=$kib PS_THREADS=16 PS_GPUS=1 PS_FDS=shared /tmp/pread_steady $CK > /tmp/s0 2>&1 &
   CUDA_VISIBLE_DEVICES=1 PS_TASK_KIB=$kib PS_THREADS=16 PS_GPUS=1 PS_FDS=shared /tmp/pread_steady $CK > /tmp/s1 2>&1; wait)
  cat /tmp/s0 /tmp/s1 | sed 's/^/two processes: /' | tee -a "$L"
done
for r in $(seq 1 "$ROUNDS"); do
  for bb in default 2097152 1048576; do
    step "round $r: kvik bench --safetensors, bounce buffer $bb"
    if [ $bb = default ]; then env=(); else env=(KVIKIO_BOUNCE_BUFFER_SIZE=$bb); fi
    env "${env[@]}" timeout 120 "$G/kvik" bench --safetensors $CK --repeats 7 2>&1 | grep -E 'Load gpu0|two GPUs / one GPU:' | tee -a "$L"
  done
done
rm -f $CK
step done
