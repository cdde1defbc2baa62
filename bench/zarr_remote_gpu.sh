#!/bin/bash
# Zarr from S3 into GPU memory (issue 19), in one GPU-machine call:
# versitygw on loopback serving a tmpfs directory; a 1 GiB v3 float32
# array in 1024 chunks of 1 MiB, uncompressed, read whole into device
# memory, against a loop that fetches and copies one chunk at a time and
# against kvik's read of the same bytes as one object; then the
# zstd-compressed and the sharded (32 inner chunks of 1 MiB per shard)
# variants. Configurations take turns in each round; medians and ratios
# are printed (targets: >= 8x the loop, >= 0.7x the object; sharded >=
# 0.8x the object, issue 29: a shard's inner chunks are read in few
# ranged GETs, not one each).
#
# Build here (no Go there), into the git-ignored folder G:
#   CGO_ENABLED=0 go build -o G/zarrremotebench ./bench/zarrremotebench
#   cp "$KVIK_TEST_VERSITYGW" G/versitygw
# then there: bash bench/zarr_remote_gpu.sh G   (about 1-2 minutes)
# REPS (default 5) rounds; SIZE and CHUNK in bytes; REQUESTS per store
# (default: zarr.DefaultMaxRequests, the kvik worker count).
set -u
G=$(cd "$1" && pwd)
OUT=${OUT:-/tmp/out}
REPS=${REPS:-5} SIZE=${SIZE:-1073741824} CHUNK=${CHUNK:-1048576} REQUESTS=${REQUESTS:-0}
D=/dev/shm/kvik-zarr-s3
mkdir -p "$OUT" && rm -rf "$D" && mkdir -p "$D/bkt"
L=$OUT/zarr_remote.txt
PORT=7071
ROOT_ACCESS_KEY=k ROOT_SECRET_KEY=s "$G/versitygw" --port 127.0.0.1:$PORT posix "$D" >"$OUT/versitygw.log" 2>&1 &
GW=$!
trap 'kill $GW 2>/dev/null; rm -rf "$D"' EXIT
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
export AWS_ACCESS_KEY_ID=k AWS_SECRET_ACCESS_KEY=s AWS_DEFAULT_REGION=us-east-1 AWS_ENDPOINT_URL=http://127.0.0.1:$PORT
nproc | sed 's/^/cores: /' | tee "$L"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$L"
timeout 420 "$G/zarrremotebench" -dir "$D/bkt" -size "$SIZE" -chunk "$CHUNK" -reps "$REPS" -requests "$REQUESTS" 2>&1 | tee -a "$L"
# The same with twice the requests in flight, for the choice of default.
REQ2=$(( $(nproc) * 2 ))
echo "=== requests $REQ2" | tee -a "$L"
timeout 300 "$G/zarrremotebench" -dir "$D/bkt" -size "$SIZE" -chunk "$CHUNK" -reps 3 -requests $REQ2 2>&1 | grep -E "RATIO|median|array" | tee -a "$L"
