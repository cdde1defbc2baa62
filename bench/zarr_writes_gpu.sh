#!/bin/bash
# Zarr writes against the encode ceiling (issue 40), in one GPU-machine
# call (about 5 minutes on 16 cores):
#  1. bench/zarrbench's rows for the compressed codecs (a 1 GiB float32
#     array of 1 MiB chunks on /dev/shm; the write and the encode
#     ceiling each the best of REPS), by the build in G and, where there
#     is one, the base build in G/base (another commit, to compare),
#     alternating, ROUNDS times;
#  2. zarr's BenchmarkWriteOverEncode (64 MiB arrays), which alternates
#     the encode ceiling and a write and reports write/encode in wall
#     and in CPU time, by G/zarr.test and G/base/zarr.test.
# The write/encode ratios of every run are printed last and kept in
# $OUT/summary.txt; logs under $OUT.
#
# Build here (no Go there), into the git-ignored folder G:
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o G/zarrbench ./bench/zarrbench
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o G/zarr.test ./zarr
# and the same from the base commit's tree into G/base (optional), then
# there: bash bench/zarr_writes_gpu.sh G
# REPS (default 3), ROUNDS (2), SIDE (16384), CODECS.
set -u
source "$(dirname "$0")/machine.sh"
G=$(cd "$1" && pwd)
OUT=${OUT:-/tmp/out}
REPS=${REPS:-3} ROUNDS=${ROUNDS:-2} SIDE=${SIDE:-16384}
CODECS=${CODECS:-zstd,blosc-lz4,blosc-zstd,gzip,sharded-zstd}
D=/dev/shm/kvik-zarr-writes
mkdir -p "$OUT" /dev/shm/kvik-zarr-writes-tmp
trap 'rm -rf "$D" /dev/shm/kvik-zarr-writes-tmp' EXIT
machine_info | tee "$OUT/machine.txt"
builds=(new)
[ -x "$G/base/zarrbench" ] && builds+=(base)
bin() { if [ "$1" = base ]; then echo "$G/base/$2"; else echo "$G/$2"; fi; }

for round in $(seq "$ROUNDS"); do
  for b in "${builds[@]}"; do
    f="$OUT/zarrbench-$b-$round.txt"
    echo "=== zarrbench $b, round $round" | tee "$f"
    timeout ${T1:-200} "$(bin "$b" zarrbench)" -dir "$D" -side "$SIDE" -reps "$REPS" -codecs "$CODECS" 2>&1 | tee -a "$f"
  done
done
for b in "${builds[@]}"; do
  t=$(bin "$b" zarr.test)
  [ -x "$t" ] || continue
  f="$OUT/bench-$b.txt"
  echo "=== BenchmarkWriteOverEncode $b" | tee "$f"
  TMPDIR=/dev/shm/kvik-zarr-writes-tmp timeout ${T2:-200} "$t" -test.run '^$' -test.bench WriteOverEncode -test.benchtime 10x -test.count 2 2>&1 | tee -a "$f"
done

# The summary: write/encode per codec and run (zarrbench: the best write
# over the best encode, and the first write over it), then the
# benchmark's ratios.
{
  for f in "$OUT"/zarrbench-*.txt; do
    awk -v run="$(basename "$f" .txt)" -v codecs="$CODECS" '$1 == "RESULT" { v[$2] = $3 }
    END {
      printf "%-22s", run
      n = split(codecs, c, ",")
      for (i = 1; i <= n; i++) {
        k = c[i]
        if (v[k "_encode"] > 0) printf "  %s %.2f/%.2f=%.3f (first %.3f)", k, v[k "_write"], v[k "_encode"], v[k "_write"] / v[k "_encode"], v[k "_write_first"] / v[k "_encode"]
      }
      printf "\n"
    }' "$f"
  done
  echo "BenchmarkWriteOverEncode (write/encode in wall and CPU time):"
  for f in "$OUT"/bench-*.txt; do
    awk -v b="$(basename "$f" .txt)" '/^BenchmarkWriteOverEncode/ {
      for (i = 1; i < NF; i++) { if ($(i+1) == "write/encode") w = $i; if ($(i+1) == "cpu-write/encode") c = $i }
      printf "%-10s %-40s wall %s cpu %s\n", b, $1, w, c
    }' "$f"
  done
} | tee "$OUT/summary.txt"
