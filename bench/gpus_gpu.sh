#!/bin/bash
# Several GPUs from one process, in one GPU-machine call (about 3 minutes
# on two GPUs): an 8 GB bf16 safetensors checkpoint and an 8 GB GGUF model
# on tmpfs (page cache), `kvik bench --safetensors` and `--gguf` (GPU 0,
# balanced over GPUs 0+1, replicated on both, ReadFileToDevice) and
# BenchmarkGPUs (one ReadDevice per GPU at once, 4 GiB; and the halves of
# one file as Futures), ROUNDS times; then the anchors of issue 29: two
# processes each reading the checkpoint onto its own GPU (and each its
# half, a file of its own), the loads' timelines (DEBUG records), and the
# host-side ceiling outside Go, one process against two: pread into pinned
# huge-page buffers (../shared/probes/pread_dest.c) and the same reads with
# their copies to the GPUs in 2 MiB chunks (bench/probes/pread_steady.c).
#
# Build here into the git-ignored folder G: G/kvik, G/kvik.test,
# G/gguf.test, G/pread_dest.c (optional); with G/old/kvik and
# G/old/kvik.test the code before is timed too, taking turns. There:
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
step make a ${GB} GB checkpoint and a ${GB} GB GGUF model
timeout 240 python3 "$R/bench/safetensors_peers.py" /dev/shm/ckpt.safetensors --make --gb "$GB" 2>&1 | tail -1 | tee -a "$L"
(cd "$R/gguf" && KVIK_GGUF_MAKE=/dev/shm/model.gguf KVIK_GGUF_GB=$GB timeout 180 "$G/gguf.test" -test.run '^TestMakeSynthetic$' 2>&1 | tail -1 | tee -a "$L")
versions=new; [ -x "$G/old/kvik" ] && versions="old new"
for r in $(seq 1 "$ROUNDS"); do
  for v in $versions; do
    b=$G; [ $v = old ] && b=$G/old
    step "round $r $v: kvik bench --safetensors, --gguf"
    timeout 200 "$b/kvik" bench --safetensors /dev/shm/ckpt.safetensors --repeats 7 2>&1 | tail -10 | tee -a "$L"
    timeout 200 "$b/kvik" bench --gguf /dev/shm/model.gguf --repeats 7 2>&1 | tail -10 | tee -a "$L"
    step "round $r $v: BenchmarkGPUs 4 GiB"
    (cd "$R" && KVIK_BENCH_DIR=/dev/shm KVIK_BENCH_SIZE=4294967296 timeout 200 "$b/kvik.test" -test.run '^$' \
      -test.bench 'GPUs' -test.benchtime 5x -test.count 2 2>&1 | grep -E 'Benchmark|FAIL' | tee -a "$L")
  done
done
rm -f /dev/shm/model.gguf
step "timeline: when each GPU's share was allocated and read (the load's DEBUG record), the last version"
KVIKIO_LOG_LEVEL=DEBUG timeout 200 "$G/kvik" bench --safetensors /dev/shm/ckpt.safetensors --repeats 3 2>&1 | grep 'tensors read to devices' | tail -6 | tee -a "$L"
step "anchor: one process, then two at once (CUDA_VISIBLE_DEVICES), each reading the checkpoint onto its GPU, 16 threads"
one() { CUDA_VISIBLE_DEVICES=$1 "$G/kvik" bench --file /dev/shm/ckpt.safetensors --memory device --threads 16 --op read --no-baselines --repeats 5 2>&1 | grep 'device  '; }
one 0 | sed 's/^/alone: /' | tee -a "$L"
(one 0 > /tmp/a & one 1 > /tmp/b; wait); sed 's/^/two processes, GPU 0: /' /tmp/a | tee -a "$L"; sed 's/^/two processes, GPU 1: /' /tmp/b | tee -a "$L"
# Two processes reading the same file at once share its pages in the
# CPU caches; a balanced load reads each half once. So also: each process
# its own half of the checkpoint, as a file of its own.
# The load against loads: two processes, each loading (safetensors.Load,
# allocation and header included) the share of the checkpoint that the
# balanced load puts on its GPU (bench/split_balanced.py), their loads
# started together (--start-at/--slot), beside one process loading the
# whole checkpoint balanced over both GPUs in the same slots.
step "anchor: two processes each loading its balanced share onto its GPU, in step; one process balanced over both, same slots"
python3 "$R/bench/split_balanced.py" /dev/shm/ckpt.safetensors 2 /dev/shm/share 2>&1 | tee -a "$L"
slot=500ms
at=$(python3 -c 'import time; print(f"{time.time() + 4:.3f}")')
(CUDA_VISIBLE_DEVICES=0 timeout 120 "$G/kvik" bench --safetensors /dev/shm/share0.safetensors --repeats 9 --start-at "$at" --slot $slot --json > /tmp/sh0.json 2>/tmp/sh0.err &
 CUDA_VISIBLE_DEVICES=1 timeout 120 "$G/kvik" bench --safetensors /dev/shm/share1.safetensors --repeats 9 --start-at "$at" --slot $slot --json > /tmp/sh1.json 2>/tmp/sh1.err; wait)
at=$(python3 -c 'import time; print(f"{time.time() + 3:.3f}")')
timeout 120 "$G/kvik" bench --safetensors /dev/shm/ckpt.safetensors --repeats 9 --start-at "$at" --slot $slot --json > /tmp/one.json 2>/tmp/one.err
cat /tmp/sh0.err /tmp/sh1.err /tmp/one.err | tail -5 | tee -a "$L"
cp /tmp/sh0.json /tmp/sh1.json /tmp/one.json "$OUT/" 2>/dev/null
python3 - /tmp/sh0.json /tmp/sh1.json /tmp/one.json /dev/shm/share0.safetensors /dev/shm/share1.safetensors /dev/shm/ckpt.safetensors <<'PY' 2>&1 | tee -a "$L"
import json, os, statistics, sys
a, b, one = (json.load(open(p)) for p in sys.argv[1:4])
sa, sb, s1 = (os.path.getsize(p) for p in sys.argv[4:7])
ta = next(r for r in a if r["name"] == "safetensors.Load gpu0")["seconds"]
tb = next(r for r in b if r["name"] == "safetensors.Load gpu0")["seconds"]
two = [sa / x / 1e9 + sb / y / 1e9 for x, y in zip(ta, tb)]
print(f"two processes, each its share, in step: sum {max(two):.2f} best, {statistics.median(two):.2f} median GB/s (per rep: {' '.join(f'{v:.1f}' for v in two)})")
g = {r["name"]: r for r in one}
bal, g0 = g["safetensors.Load gpu0+1 balanced"], g["safetensors.Load gpu0"]
print(f"one process, same slots: balanced {bal['gb_per_s']:.2f} best, {bal['median_gb_per_s']:.2f} median; GPU 0 {g0['gb_per_s']:.2f} ({g0['median_gb_per_s']:.2f}): {bal['gb_per_s'] / g0['gb_per_s']:.2f}x ({bal['median_gb_per_s'] / g0['median_gb_per_s']:.2f}x)")
print(f"balanced load / two processes' loads: {bal['gb_per_s'] / max(two):.2f}x best, {bal['median_gb_per_s'] / statistics.median(two):.2f}x median")
PY
rm -f /dev/shm/share0.safetensors /dev/shm/share1.safetensors
step "anchor: two processes at once, each reading its half of the checkpoint (a file of its own) onto its GPU"
half=$(($(stat -c %s /dev/shm/ckpt.safetensors) / 2))
head -c $half /dev/shm/ckpt.safetensors > /dev/shm/half0; tail -c +$((half + 1)) /dev/shm/ckpt.safetensors > /dev/shm/half1
halfone() { CUDA_VISIBLE_DEVICES=$1 "$G/kvik" bench --file /dev/shm/half$1 --memory device --threads 16 --op read --no-baselines --repeats 5 2>&1 | grep 'device  '; }
(halfone 0 > /tmp/a & halfone 1 > /tmp/b; wait); sed 's/^/two processes, halves, GPU 0: /' /tmp/a | tee -a "$L"; sed 's/^/two processes, halves, GPU 1: /' /tmp/b | tee -a "$L"
rm -f /dev/shm/half0 /dev/shm/half1
step "probe: pread into pinned buffers and copies to the GPUs, 2 MiB chunks, the checkpoint (bench/probes/pread_steady.c)"
if gcc -O2 -pthread "$R/bench/probes/pread_steady.c" -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcuda -o /tmp/pread_steady; then
  PS_TASK_KIB=2048 PS_THREADS=32 PS_GPUS=2 PS_FDS=shared /tmp/pread_steady /dev/shm/ckpt.safetensors 2>&1 | sed 's/^/one process, two GPUs: /' | tee -a "$L"
  (CUDA_VISIBLE_DEVICES=0 PS_TASK_KIB=2048 PS_THREADS=16 PS_GPUS=1 PS_FDS=shared /tmp/pread_steady /dev/shm/ckpt.safetensors > /tmp/s0 2>&1 &
   CUDA_VISIBLE_DEVICES=1 PS_TASK_KIB=2048 PS_THREADS=16 PS_GPUS=1 PS_FDS=shared /tmp/pread_steady /dev/shm/ckpt.safetensors > /tmp/s1 2>&1; wait)
  cat /tmp/s0 /tmp/s1 | sed 's/^/two processes, one GPU each: /' | tee -a "$L"
fi
rm -f /dev/shm/ckpt.safetensors
if [ -f "$G/pread_dest.c" ]; then
  step "probe: pread into pinned huge-page buffers (thp-pin), 4 GiB page-cached file"
  gcc -O2 -pthread "$G/pread_dest.c" -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcuda -o /tmp/pread_dest 2>&1 | tail -3
  F=/dev/shm/kvik-bench-4294967296
  PD_MODES=thp-pin PD_THREADS=16,32 /tmp/pread_dest "$F" 2>&1 | sed 's/^/one process: /' | tee -a "$L"
  (CUDA_VISIBLE_DEVICES=0 PD_MODES=thp-pin PD_THREADS=16 /tmp/pread_dest "$F" > /tmp/p0 2>&1 &
   CUDA_VISIBLE_DEVICES=1 PD_MODES=thp-pin PD_THREADS=16 /tmp/pread_dest "$F" > /tmp/p1 2>&1; wait)
  cat /tmp/p0 /tmp/p1 | sed 's/^/two processes: /' | tee -a "$L"
fi
rm -f /dev/shm/kvik-bench-*
step done
