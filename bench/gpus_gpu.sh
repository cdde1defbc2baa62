#!/bin/bash
# Two GPUs from one process, in one GPU-machine call: an 8 GB bf16
# safetensors checkpoint on tmpfs (page cache), `kvik bench --safetensors`
# (GPU 0, balanced over GPUs 0+1, ReadFileToDevice) and BenchmarkGPUs
# (one ReadDevice per GPU at once, 4 GiB) for the code before (G/old) and
# now (G) taking turns, then the host-side ceiling outside Go:
# ../shared/probes/pread_dest.c into pinned huge-page buffers, one process
# against two.
#
# Build here into the git-ignored folder G: G/kvik, G/kvik.test (and the
# same of the code to compare in G/old), G/pread_dest.c; then there:
#   bash bench/gpus_gpu.sh G
set -u
G=$(cd "$1" && pwd)
R=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
ROUNDS=${ROUNDS:-2} GB=${GB:-8}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KVIKIO_COMPAT_MODE=on
L=$OUT/gpus.txt
step() { echo "=== $(date -u +%T) $*" | tee -a "$L"; }
step machine; (nvidia-smi -L; nvidia-smi topo -m; nproc) 2>&1 | tee -a "$L"
step make a ${GB} GB checkpoint
timeout 240 python3 "$R/bench/safetensors_peers.py" /dev/shm/ckpt.safetensors --make --gb "$GB" 2>&1 | tail -3 | tee -a "$L"
for r in $(seq 1 "$ROUNDS"); do
  for v in old new; do
    b=$G; [ $v = old ] && b=$G/old
    step "round $r $v: kvik bench --safetensors"
    timeout 200 "$b/kvik" bench --safetensors /dev/shm/ckpt.safetensors --repeats 5 2>&1 | tee -a "$L"
    step "round $r $v: BenchmarkGPUs 4 GiB"
    (cd "$R" && KVIK_BENCH_DIR=/dev/shm KVIK_BENCH_SIZE=4294967296 timeout 200 "$b/kvik.test" -test.run '^$' \
      -test.bench 'GPUs' -test.benchtime 5x -test.count 2 2>&1 | grep -E 'Benchmark|ok|FAIL' | tee -a "$L")
  done
done
rm -f /dev/shm/ckpt.safetensors
if [ -f "$G/pread_dest.c" ]; then
  step "probe: pread into pinned huge-page buffers (thp-pin), 4 GiB page-cached file"
  gcc -O2 -pthread "$G/pread_dest.c" -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcuda -o /tmp/pread_dest 2>&1 | tail -3
  F=/dev/shm/kvik-bench-4294967296
  step "one process"
  PD_MODES=thp-pin,reuse PD_THREADS=16,32 /tmp/pread_dest "$F" 2>&1 | tee -a "$L"
  step "two processes at once, 16 threads each"
  (CUDA_VISIBLE_DEVICES=0 PD_MODES=thp-pin PD_THREADS=16 /tmp/pread_dest "$F" > /tmp/p0 2>&1 &
   CUDA_VISIBLE_DEVICES=1 PD_MODES=thp-pin PD_THREADS=16 /tmp/pread_dest "$F" > /tmp/p1 2>&1; wait)
  cat /tmp/p0 /tmp/p1 | tee -a "$L"
fi
step done
