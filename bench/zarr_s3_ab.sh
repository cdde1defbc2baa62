#!/bin/bash
# Two builds of bench/zarrremotebench against versitygw in the split mode
# of bench/zarr_s3.sh, alternating, so that a change to the remote read
# path is read against the machine's drift (one process's ceilings differ
# from the next's by up to 15% on the H200; the fifth session of
# 2026-11-28 compared its fetch gate this way).
#
# Build here, into two git-ignored folders A and B (the builds to compare,
# e.g. from a worktree of the older commit), each with versitygw:
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o A/ ./bench/zarrremotebench
#   cp "$KVIK_TEST_VERSITYGW" A/versitygw      # and the same for B
# then there: bash bench/zarr_s3_ab.sh A B [PAIRS]
# Logs go to $OUT/ab-{a,b}-N/s3-split.txt; the ratios of each run are
# printed as they come. ZRB_ARGS (default: the three codecs that miss
# issue 40's S3 goal, five rounds, -cpu) are the bench's arguments.
set -u
R=$(cd "$(dirname "$0")/.." && pwd)
source "$R/bench/zarr_s3.sh"
A=$(cd "$1" && pwd) B=$(cd "$2" && pwd)
PAIRS=${3:-2}
OUT=${OUT:-/tmp/out}
MODES=split
ARGS=${ZRB_ARGS:--only -codecs zstd,blosc-zstd,sharded-zstd -reps 5 -cpu}
for i in $(seq "$PAIRS"); do
  for v in a b; do
    d=$A
    [ "$v" = b ] && d=$B
    (ZRB_ARGS= s3_modes "$d" "$OUT/ab-$v-$i" $ARGS) >/dev/null 2>&1
    echo "== $v (pair $i)"
    grep -E '^RATIO zarr [a-z-]+ (/|w|r)' "$OUT/ab-$v-$i/s3-split.txt" | grep -v -e '^RATIO zarr raw' -e 'raw object' | sed 's/ (issue 40.*//'
  done
done
