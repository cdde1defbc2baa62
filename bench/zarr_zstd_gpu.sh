#!/bin/bash
# zstd through the system's libzstd against klauspost/compress (issue 40),
# in one GPU-machine call (about 3 minutes on 16 cores): bench/zarrbench
# on a 1 GiB float32 v3 array of 1 MiB chunks (a smooth field plus noise)
# in /dev/shm, for zstd, blosc-zstd and sharded-zstd, run twice, with
# KVIK_ZSTD=go and KVIK_ZSTD=native: decode and encode ceilings on all
# cores, host and device writes, host and device region reads. The
# summary (each figure under go and native, and native/go) is printed
# last and kept in $OUT/summary.txt; logs under $OUT.
#
# Build here (no Go there), into the git-ignored folder G:
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o G/zarrbench ./bench/zarrbench
# then there: bash bench/zarr_zstd_gpu.sh G
# REPS (default 3); SIDE (16384) and CHUNK (512) for zarrbench.
set -u
source "$(dirname "$0")/machine.sh"
G=$(cd "$1" && pwd)
OUT=${OUT:-/tmp/out}
REPS=${REPS:-3} SIDE=${SIDE:-16384} CHUNK=${CHUNK:-512}
CODECS=zstd,blosc-zstd,sharded-zstd
D=/dev/shm/kvik-zarr-zstd
mkdir -p "$OUT"
trap 'rm -rf "$D"' EXIT
{ machine_info; ldconfig -p | grep 'libzstd.so.1 ' || echo "no libzstd.so.1 in the loader's cache"; } | tee "$OUT/machine.txt"

for impl in go native; do
  rm -rf "$D"
  echo "=== zarrbench, KVIK_ZSTD=$impl" | tee "$OUT/zarrbench-$impl.txt"
  KVIK_ZSTD=$impl timeout ${T1:-240} "$G/zarrbench" -dir "$D" -side "$SIDE" -chunk "$CHUNK" -reps "$REPS" -codecs "$CODECS" 2>&1 | tee -a "$OUT/zarrbench-$impl.txt"
done

# The summary: each RESULT under go and native, and their ratio.
awk 'FNR == 1 { impl = (FILENAME ~ /-go\.txt$/) ? "go" : "native" } $1 == "RESULT" { v[impl, $2] = $3 }
function g(i, k) { return ((i, k) in v) ? sprintf("%.2f", v[i, k]) : "-" }
function r(k) { return (("go", k) in v) && (("native", k) in v) && v["go", k] > 0 ? sprintf("%.2f", v["native", k] / v["go", k]) : "-" }
END {
  printf "%-13s %-8s %7s %7s %7s %7s %7s %7s %7s\n", "GB/s", "", "ratio", "decode", "encode", "write", "devwr", "host", "gpu"
  n = split("zstd blosc-zstd sharded-zstd", c, " ")
  m = split("ratio decode encode write devwrite host gpu", f, " ")
  for (i = 1; i <= n; i++) {
    for (j = 1; j <= 3; j++) {
      impl = j == 1 ? "go" : j == 2 ? "native" : "native/go"
      printf "%-13s %-8s", (j == 1 ? c[i] : ""), impl
      for (k = 1; k <= m; k++) printf " %7s", j == 3 ? r(c[i] "_" f[k]) : g(impl, c[i] "_" f[k])
      printf "\n"
    }
  }
  print "decode, encode: the ceilings on all cores; host, gpu: region reads (zarr default layout); write, devwr: region writes"
}' "$OUT/zarrbench-go.txt" "$OUT/zarrbench-native.txt" | tee "$OUT/summary.txt"
