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
# ROUNDS (default 1; each round of both file systems takes about 5 minutes) rounds per file system; GB (default 8) checkpoint size;
# DIRS (default "/dev/shm/save /root/save") the folders saved to. With a
# second kvik binary in G/old (the code before a change), each round runs
# it too, old and new taking turns.
# EXT4_SWEEP=1 first measures what bounds writes to the ext4 disk, with
# the checkpoint's size: dd of the checkpoint with O_DIRECT (one stream
# and four at once) and buffered with a final fsync, and `kvik bench --op
# write --memory host` (synced writes; its storage ceiling is 16 threads
# of O_DIRECT pwrite) at 8-64 workers and 4 and 16 MiB tasks: the
# variants behind "the disk bounds every writer" (a few minutes).
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
if [ "${EXT4_SWEEP:-0}" = 1 ]; then
  step "ext4 write ceiling: dd and kvik bench --op write variants, $(stat -c %s $CK) bytes"
  mkdir -p /root/sweep
  ddw() { dd if=$CK of=$1 bs=4M $2 2>&1 | tail -1; rm -f $1; }
  echo "dd oflag=direct, one stream: $(ddw /root/sweep/d1 oflag=direct)" | tee -a "$L"
  echo "dd buffered + fsync: $(ddw /root/sweep/b1 conv=fsync)" | tee -a "$L"
  q=$(($(stat -c %s $CK) / 4 / 4194304))
  t0=$(date +%s.%N)
  for i in 0 1 2 3; do dd if=$CK of=/root/sweep/p$i bs=4M skip=$((i * q)) count=$q oflag=direct 2>/dev/null & done; wait
  echo "dd oflag=direct, four streams: $(python3 -c "print(round(4*$q*4194304/($(date +%s.%N)-$t0)/1e9, 2))") GB/s" | tee -a "$L"
  rm -f /root/sweep/p*
  sz=$(stat -c %s $CK)
  for task in 4194304 16777216; do
    echo "kvik bench --op write, task $task:" | tee -a "$L"
    KVIKIO_TASK_SIZE=$task timeout 400 "$G/kvik" bench --dir /root/sweep --size $sz --op write --memory host \
      --threads 8,16,32,64 --repeats 2 2>&1 | grep -E '^write|best' | tee -a "$L"
  done
  rm -rf /root/sweep
fi
for dir in ${DIRS:-/dev/shm/save /root/save}; do
  mkdir -p $dir
  df -hT $dir | tail -1 | tee -a "$L"
  for r in $(seq 1 "$ROUNDS"); do
    step "$dir round $r"
    kv() { echo "--- kvik $1" | tee -a "$L"; timeout 280 "$2" bench --safetensors $CK --save --dir $dir --repeats 3 2>&1 | tee -a "$L"; }
    new() { kv new "$G/kvik"; }
    old() { [ -x "$G/old/kvik" ] && kv old "$G/old/kvik"; }
    py() { timeout 200 python3 "$R/bench/safetensors_peers.py" $CK --save $dir --repeats 2 2>&1 | tee -a "$L"; }
    if [ $((r % 2)) = 1 ]; then new; old; py; else py; old; new; fi
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
