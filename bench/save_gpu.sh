#!/bin/bash
# Checkpoint saves from GPU memory in one GPU-machine call: an 8 GB
# transformer-like bf16 checkpoint (made on /dev/shm) loaded onto the GPU,
# saved as a new file to tmpfs (/dev/shm) and to the root ext4 (/root):
# `kvik bench --safetensors FILE --save` (safetensors.Save from GPU 0, from
# GPUs 0+1 where there are two, from host memory, SaveSharded at 2 GB, and
# kvik.SaveFile of the same bytes from host memory, the ceiling, taking
# turns) against safetensors.torch.save_file of the same CUDA tensors
# (bench/safetensors_peers.py --save), kvik and Python taking turns by
# round. Then the sharded cross-check: a sharded checkpoint saved from GPU
# memory, read by safetensors' own reader (safetensors/testdata/
# xcheck_sharded.py), and the save tests that need a GPU.
#
# Build here into the git-ignored folder G:
#   CGO_ENABLED=0 go build -ldflags=-s -o G/ ./cmd/kvik
#   CGO_ENABLED=0 go test -c -ldflags=-s -o G/safetensors.test ./safetensors
#   CGO_ENABLED=0 go test -c -ldflags=-s -o G/kvik.test .
# then carry G and run, there: bash bench/save_gpu.sh G
# ROUNDS (default 1; each round of both file systems takes about 5 minutes) rounds per file system; GB (default 8) checkpoint size.
set -u
G=$(cd "$1" && pwd)
R=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
ROUNDS=${ROUNDS:-1} GB=${GB:-8}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KVIKIO_COMPAT_MODE=on
L=$OUT/save.txt
step() { echo "=== $(date -u +%T) $*" | tee -a "$L"; }
CK=/dev/shm/ckpt.safetensors
step make a ${GB} GB checkpoint
[ -f $CK ] || timeout 180 python3 "$R/bench/safetensors_peers.py" $CK --make --gb "$GB" 2>&1 | tee -a "$L"
"$G/kvik" info $CK | head -4 | tee -a "$L"
for dir in /dev/shm/save /root/save; do
  mkdir -p $dir
  df -hT $dir | tail -1 | tee -a "$L"
  for r in $(seq 1 "$ROUNDS"); do
    step "$dir round $r"
    kv() { timeout 280 "$G/kvik" bench --safetensors $CK --save --dir $dir --repeats 3 2>&1 | tee -a "$L"; }
    py() { timeout 200 python3 "$R/bench/safetensors_peers.py" $CK --save $dir --repeats 2 2>&1 | tee -a "$L"; }
    if [ $((r % 2)) = 1 ]; then kv; py; else py; kv; fi
  done
  rm -rf $dir
done
step sharded cross-check: SaveSharded from GPU memory, read by safetensors
X=/root/xcheck-sharded
rm -rf $X && mkdir -p $X
(cd "$R/safetensors" && KVIK_SHARDED_XCHECK_OUT=$X timeout 120 "$G/safetensors.test" -test.v -test.count=1 \
  -test.run 'TestWriteShardedForPython' 2>&1 | tail -3 | tee -a "$L")
timeout 120 python3 "$R/safetensors/testdata/xcheck_sharded.py" $X 2>&1 | tee -a "$L"
step save tests on the GPU
(cd "$R/safetensors" && timeout 300 "$G/safetensors.test" -test.count=1 \
  -test.run 'TestSaveFromDevices|TestDeviceRoundTrip|TestSaveSharded' 2>&1 | tail -3 | tee -a "$L")
(cd "$R" && timeout 300 "$G/kvik.test" -test.count=1 \
  -test.run 'TestSaveFile|TestSaveStaged|TestLayoutSpans|TestDevice' 2>&1 | tail -3 | tee -a "$L")
rm -rf $X
step done
