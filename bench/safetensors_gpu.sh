#!/bin/bash
# The safetensors load figures of docs/performance.md in one GPU-machine
# call: an 8 GB transformer-like bf16 checkpoint, warm (tmpfs) and cold
# (root ext4, page cache dropped before every load), kvik against
# safetensors.torch.load_file and safe_open. kvik's configurations take
# turns inside one process; kvik and the Python peers take turns by round,
# so that neither always runs on the drive's better minutes. Then
# BenchmarkColdUnaligned: a cold read from an unaligned offset with task
# boundaries on page boundaries (the default) and without, alternating.
#
# Build here into the git-ignored folder G (as bench/gpu_tests.sh says:
# G/kvik and G/kvik.test), then there: bash bench/safetensors_gpu.sh G
# ROUNDS (default 3) cold rounds; GB (default 8) checkpoint size.
set -u
G=$(cd "$1" && pwd)
R=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
ROUNDS=${ROUNDS:-3} GB=${GB:-8}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KVIKIO_COMPAT_MODE=on
L=$OUT/safetensors.txt
step() { echo "=== $(date -u +%T) $*" | tee -a "$L"; }
step make a ${GB} GB checkpoint
timeout 180 python3 "$R/bench/safetensors_peers.py" /dev/shm/ckpt.safetensors --make --gb "$GB" 2>&1 | tee -a "$L"
"$G/kvik" info /dev/shm/ckpt.safetensors | head -4 | tee -a "$L"
step warm: kvik
timeout 120 "$G/kvik" bench --safetensors /dev/shm/ckpt.safetensors --repeats 5 2>&1 | tee -a "$L"
step warm: Python peers
timeout 120 python3 "$R/bench/safetensors_peers.py" /dev/shm/ckpt.safetensors --repeats 2 2>&1 | tee -a "$L"
step cold: ${ROUNDS} rounds
cp /dev/shm/ckpt.safetensors /root/ckpt.safetensors && rm /dev/shm/ckpt.safetensors && sync
echo 3 > /proc/sys/vm/drop_caches
kvik_cold() { timeout 150 "$G/kvik" bench --safetensors /root/ckpt.safetensors --drop-cache --repeats 2 2>&1 | tee -a "$L"; }
py_cold() { timeout 150 python3 "$R/bench/safetensors_peers.py" /root/ckpt.safetensors --drop-cache --repeats 1 2>&1 | tee -a "$L"; }
for r in $(seq 1 "$ROUNDS"); do
  step "cold round $r"
  if [ $((r % 2)) = 1 ]; then kvik_cold; py_cold; else py_cold; kvik_cold; fi
done
rm -f /root/ckpt.safetensors
step BenchmarkColdUnaligned, 2 GiB on root ext4
mkdir -p /root/kb
(cd "$R" && KVIK_BENCH_DIR=/root/kb KVIK_BENCH_SIZE=2147483648 KVIK_BENCH_THREADS=16,1 \
  timeout 300 "$G/kvik.test" -test.run '^$' -test.bench ColdUnaligned -test.benchtime 4x 2>&1 | tee -a "$L")
step done
