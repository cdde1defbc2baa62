#!/bin/bash
# Staging variants of POSIX device reads from the page cache, on the GPU
# machine: BenchmarkStagingVariants at each size of SIZES (bytes) in
# /dev/shm, the variants of VARIANTS alternating in one process with the
# host read. Logs go under $OUT, a summary table last.
#
# Build here:  CGO_ENABLED=0 go test -c -ldflags=-s -o G/kvik.test .
# Run there:   bash bench/staging_gpu.sh G
set -u
G=$(cd "$1" && pwd)
OUT=${OUT:-/tmp/out}
SIZES=${SIZES:-16777216 67108864 1073741824 4294967296}
VARIANTS=${VARIANTS:-pipeline,nozc,serial,parts4}
THREADS=${THREADS:-1,4,16,32}
BENCHTIME=${BENCHTIME:-5x}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
for size in $SIZES; do
  log=$OUT/staging-$size.txt
  KVIK_BENCH_DIR=/dev/shm KVIK_BENCH_SIZE=$size KVIK_BENCH_VARIANTS=$VARIANTS KVIK_BENCH_THREADS=$THREADS \
    "$G/kvik.test" -test.run '^$' -test.bench StagingVariants -test.benchtime "$BENCHTIME" > "$log" 2>&1
  rm -f /dev/shm/kvik-bench-$size
done
# One line per cell: size, workers, then each metric.
for size in $SIZES; do
  grep '^BenchmarkStagingVariants' "$OUT/staging-$size.txt" | sed -E "s/^BenchmarkStagingVariants\/threads=([0-9]+)-[0-9]+ +[0-9]+ +[0-9.]+ ns\/op/$size \1/; s/ +/ /g"
done | tee "$OUT/staging-summary.txt"
