#!/bin/bash
# The code before and after a change, side by side on one GPU, in one
# GPU-machine call: a bf16 safetensors checkpoint (GB, default 2) on tmpfs
# and the same bytes plus a raw object of random bytes on versitygw
# (loopback, root on tmpfs); then, ROUNDS times (default 2), old and new
# taking turns: `kvik bench --safetensors FILE` (ReadFileToDevice and
# safetensors.Load onto GPU 0), `kvik bench --url s3://…/ckpt.safetensors`
# (RemoteHandle.ReadDevice and safetensors.Load from S3) and
# `kvik bench --url s3://…/raw.bin` (remote reads into host and device
# memory). Logs and a summary under $OUT.
#
# Build here into the git-ignored folder G: G/kvik (new), G/old/kvik (old),
# G/versitygw (stripped: go install -ldflags='-s -w'
# github.com/versity/versitygw/cmd/versitygw@v1.8.0); xz them. There:
#   bash bench/oldnew_gpu.sh G
set -u
G=$(cd "$1" && pwd)
R=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
GB=${GB:-2} ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT" /dev/shm/s3/bkt /dev/shm/tmp
for f in "$G"/*.xz "$G"/old/*.xz; do [ -f "$f" ] && xz -d "$f"; done
chmod +x "$G/kvik" "$G/old/kvik" "$G/versitygw"
export PYTHONUNBUFFERED=1 KVIKIO_COMPAT_MODE=on TMPDIR=/dev/shm/tmp
L=$OUT/oldnew.txt
step() { echo "=== $(date -u +%T) $*" | tee -a "$L"; }
step "machine: $(nvidia-smi -L | head -1); $(nproc) CPUs"
CK=/dev/shm/ckpt.safetensors
timeout 120 python3 "$R/bench/safetensors_peers.py" $CK --make --gb "$GB" 2>&1 | tail -1 | tee -a "$L"
head -c $((GB << 30)) /dev/urandom > /dev/shm/raw.bin
PORT=$((20000 + RANDOM % 20000))
ROOT_ACCESS_KEY=testkey ROOT_SECRET_KEY=testsecret "$G/versitygw" --port "127.0.0.1:$PORT" posix /dev/shm/s3 > "$OUT/versitygw.txt" 2>&1 &
VPID=$!
trap 'kill $VPID 2>/dev/null' EXIT
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
export AWS_ACCESS_KEY_ID=testkey AWS_SECRET_ACCESS_KEY=testsecret AWS_DEFAULT_REGION=us-east-1 AWS_ENDPOINT_URL=http://127.0.0.1:$PORT
"$G/kvik" cp $CK s3://bkt/ckpt.safetensors 2>&1 | tail -1 | tee -a "$L"
"$G/kvik" cp /dev/shm/raw.bin s3://bkt/raw.bin 2>&1 | tail -1 | tee -a "$L"
for r in $(seq 1 "$ROUNDS"); do
  order="old new"; [ $((r % 2)) = 0 ] && order="new old"
  for v in $order; do
    b=$G/kvik; [ $v = old ] && b=$G/old/kvik
    step "round $r $v: file, S3 checkpoint, S3 raw object"
    timeout 120 "$b" bench --safetensors $CK --repeats 5 2>&1 | grep -E 'GB/s' | sed "s/^/$v file /" | tee -a "$L"
    timeout 120 "$b" bench --url s3://bkt/ckpt.safetensors --repeats 5 2>&1 | grep -E 'GB/s' | sed "s/^/$v s3ckpt /" | tee -a "$L"
    timeout 120 "$b" bench --url s3://bkt/raw.bin --repeats 5 2>&1 | grep -E ' -> ' | sed "s/^/$v s3raw /" | tee -a "$L"
  done
done
step done
