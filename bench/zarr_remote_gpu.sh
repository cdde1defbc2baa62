#!/bin/bash
# Zarr from S3 into GPU memory (issues 19 and 40), in one GPU-machine
# call: versitygw on loopback serving a tmpfs directory; a 1 GiB v3
# float32 array in 1024 chunks of 1 MiB, uncompressed, read whole into
# device memory, against a loop that fetches and copies one chunk at a
# time and against kvik's read of the same bytes as one object; then the
# compressed (zstd, blosc-lz4, blosc-zstd, gzip) and sharded (32 inner
# chunks of 1 MiB per shard, uncompressed and zstd) variants, each
# compressed one against its decode ceiling (the same stored chunks
# decoded in memory on the same cores). Configurations take turns in each
# round; medians and ratios are printed (targets: >= 8x the loop, >= 0.7x
# the object; sharded >= 0.8x the object, issue 29; issue 40: compressed
# >= 0.8x raw or >= 0.9x the decode ceiling).
#
# Two modes (bench/zarr_s3.sh): "shared", versitygw and the bench on
# every core, and "split", versitygw pinned with taskset to SERVER_CPUS
# (default the last quarter of the cores, 12-15 of 16) and the bench to
# the others with GOMAXPROCS their count: a real S3 server runs on other
# machines and spends none of the client's CPU, while versitygw on
# loopback takes the cores that decode. versitygw keeps connections
# alive (KEEPALIVE=0: not, a TCP connection per GET, as in the results
# up to zarr-h200-2026-11-28).
#
# Build here (no Go there), into the git-ignored folder G (gzip: the
# carry takes 64 MiB; the script unpacks what is gzipped):
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o G/zarrremotebench ./bench/zarrremotebench
#   cp "$KVIK_TEST_VERSITYGW" G/versitygw && gzip -f G/*
# then there: bash bench/zarr_remote_gpu.sh G   (about 3-4 minutes)
# REPS (default 5) rounds; SIZE and CHUNK in bytes; REQUESTS per store
# (default: zarr.DefaultMaxRequests, the kvik worker count); MODES
# ("shared split"), SERVER_CPUS, KEEPALIVE (bench/zarr_s3.sh); REQ2=1
# adds a shared-mode run with twice the cores' count of requests in flight.
set -u
R=$(cd "$(dirname "$0")/.." && pwd)
source "$R/bench/zarr_s3.sh"
G=$(s3_unpack "$1")
OUT=${OUT:-/tmp/out}
REPS=${REPS:-5} SIZE=${SIZE:-1073741824} CHUNK=${CHUNK:-1048576} REQUESTS=${REQUESTS:-0}
mkdir -p "$OUT"
machine_info | tee "$OUT/machine.txt"
s3_modes "$G" "$OUT" -size "$SIZE" -chunk "$CHUNK" -reps "$REPS" -requests "$REQUESTS"
if [ "${REQ2:-0}" = 1 ]; then
  # The same with twice the requests in flight, for the choice of default.
  MODES=shared s3_modes "$G" "$OUT/req2" -size "$SIZE" -chunk "$CHUNK" -reps 3 -requests $(( $(nproc) * 2 ))
fi
s3_summary "$OUT" | tee "$OUT/summary.txt"
