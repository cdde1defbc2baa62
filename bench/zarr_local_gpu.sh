#!/bin/bash
# Zarr at the speed of raw reads (issue 40), in one GPU-machine call
# (about 7 minutes on 16 cores; the S3 part alone: bench/zarr_remote_gpu.sh):
#  1. bench/zarrbench: a 1 GiB float32 v3 array (16384 x 16384, 512 x 512
#     chunks of 1 MiB, a smooth field plus noise) stored by kvik on
#     /dev/shm in each codec (raw, zstd, blosc-lz4, blosc-zstd, gzip,
#     sharded-zstd: 4096 x 4096 shards of 1 MiB inner chunks): decode and
#     encode ceilings on all cores, host and device writes, host and
#     device region reads (the device reads in zarr's default layout of
#     the band buffers, then the region and the cells layouts forced),
#     and kvik.ReadFileToDevice of the same bytes;
#  2. bench/zarr_tensorstore.py: TensorStore reads of the same arrays
#     into host memory, then torch copies to the GPU (skipped, saying so,
#     where tensorstore or torch does not import);
#  3. bench/zarrremotebench: the same codecs from versitygw on loopback
#     (1 GiB, 1 MiB chunks of 256 x 1024; the sharded arrays also through
#     a store opened with zarr.WithWholeShards), each with its decode ceiling
#     (the same stored chunks decoded in memory on the same cores), in two
#     modes (bench/zarr_s3.sh): "shared", versitygw and the bench on every
#     core, and "split", versitygw pinned to SERVER_CPUS (default the last
#     quarter of the cores, 12-15 of 16) and the bench to the others: a
#     real S3 server runs elsewhere and spends none of the client's CPU,
#     while versitygw on loopback takes the cores that decode. versitygw
#     keeps connections alive (KEEPALIVE=0: not, as in zarr-h200-2026-11-28).
# The summary of the issue's ratios is printed last and kept in
# $OUT/summary.txt; logs under $OUT.
#
# Build here (no Go there), into the git-ignored folder G (gzip: the
# carry takes 64 MiB; the script unpacks what is gzipped):
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o G/zarrbench ./bench/zarrbench
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o G/zarrremotebench ./bench/zarrremotebench
#   cp "$KVIK_TEST_VERSITYGW" G/versitygw && gzip -f G/*
# then there: bash bench/zarr_local_gpu.sh G
# REPS (default 3); SIDE (16384), CHUNK (512) and ZB_ARGS (more flags,
# e.g. -alt-rowwrites, -alt-unshuffle) for zarrbench; MODES
# ("shared split"), SERVER_CPUS, KEEPALIVE for S3 (bench/zarr_s3.sh).
set -u
R=$(cd "$(dirname "$0")/.." && pwd)
source "$R/bench/zarr_s3.sh"
G=$(s3_unpack "$1")
OUT=${OUT:-/tmp/out}
REPS=${REPS:-3} SIDE=${SIDE:-16384} CHUNK=${CHUNK:-512}
D=/dev/shm/kvik-zarr-local
mkdir -p "$OUT"
rm -rf "$D"
machine_info | tee "$OUT/machine.txt"

echo "=== zarrbench" | tee "$OUT/zarrbench.txt"
timeout ${T1:-300} "$G/zarrbench" -dir "$D" -side "$SIDE" -chunk "$CHUNK" -reps "$REPS" -keep ${ZB_ARGS:-} 2>&1 | tee -a "$OUT/zarrbench.txt"

echo "=== tensorstore" | tee "$OUT/tensorstore.txt"
if python3 -c 'import tensorstore, torch' >/dev/null 2>&1; then
  KVIK_CRC32=$(awk '$1 == "CRC32" { print $2; exit }' "$OUT/zarrbench.txt") \
  timeout ${T2:-150} python3 "$R/bench/zarr_tensorstore.py" "$D" "$REPS" raw zstd blosc-lz4 blosc-zstd gzip sharded-zstd 2>&1 | tee -a "$OUT/tensorstore.txt"
else
  echo "skipped: python3 cannot import tensorstore and torch" | tee -a "$OUT/tensorstore.txt"
fi
rm -rf "$D"

echo "=== s3 (versitygw), modes: $MODES"
s3_modes "$G" "$OUT" -reps "$REPS" -alt-whole

# The summary: every RESULT line, and the ratios the issue names.
cat "$OUT"/zarrbench.txt "$OUT"/tensorstore.txt | awk '$1 == "RESULT" { v[$2] = $3 }
function r(a, b) { return (a in v) && (b in v) && v[b] > 0 ? sprintf("%.2f", v[a] / v[b]) : "-" }
function g(k) { return (k in v) ? sprintf("%.2f", v[k]) : "-" }
END {
  printf "%-13s %6s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s %8s %8s %8s %8s %7s\n", "GB/s", "ratio", "decode", "dec-hot", "encode", "write", "devwr", "host", "gpu", "gpu-reg", "gpu-cel", "ts-host", "ts-gpu", "gpu/raw", "gpu/dec", "gpu/hot", "gpu/ts", "wr/enc"
  n = split("raw zstd blosc-lz4 blosc-zstd gzip sharded-zstd", c, " ")
  for (i = 1; i <= n; i++) {
    k = c[i]
    printf "%-13s %6s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s %8s %8s %8s %8s %7s\n", k, g(k "_ratio"), g(k "_decode"), g(k "_decode_hot"), g(k "_encode"), g(k "_write"), g(k "_devwrite"), g(k "_host"), g(k "_gpu"), g(k "_gpu_region"), g(k "_gpu_cells"), g("ts_host_" k), g("ts_gpu_" k), r(k "_gpu", "raw_gpu"), r(k "_gpu", k "_decode"), r(k "_gpu", k "_decode_hot"), r(k "_gpu", "ts_gpu_" k), r(k "_write", k "_encode")
  }
  printf "ReadFileToDevice of the same bytes: %s GB/s; raw region to GPU / ReadFileToDevice: %s (goal >= 0.9; region layout %s, cells layout %s)\n", g("file_gpu"), r("raw_gpu", "file_gpu"), r("raw_gpu_region", "file_gpu"), r("raw_gpu_cells", "file_gpu")
  print "gpu: zarr default layout of the band buffers (Auto); gpu-reg, gpu-cel: the region and cells layouts forced (zarrtune)"
  print "decode: every chunk decoded into memory of its own on all cores; dec-hot: into one cache-resident buffer per core (no read writes that little)"
  print "goals: zstd, blosc >= 0.8 gpu/raw or >= 0.9 gpu/dec; gzip >= 0.9 gpu/dec; gpu/ts >= 2 (zstd, blosc, sharded-zstd); wr/enc and devwr/enc >= 0.9"
  # Each goal of the issue, met or not, in this run.
  line = ""; miss = 0
  if (("raw_gpu" in v) && ("file_gpu" in v)) { ok = v["raw_gpu"] >= 0.9 * v["file_gpu"]; line = line sprintf(" raw/file %s", ok ? "ok" : "MISS"); miss += !ok }
  for (i = 2; i <= n; i++) {
    k = c[i]
    if ((k "_gpu" in v) && (k "_decode" in v)) {
      want = 0.9 * v[k "_decode"]
      if (k != "gzip" && ("raw_gpu" in v)) want = (0.8 * v["raw_gpu"] < want) ? 0.8 * v["raw_gpu"] : want
      ok = v[k "_gpu"] >= want; line = line sprintf(" %s/dec %s", k, ok ? "ok" : "MISS"); miss += !ok
    }
    if (k != "gzip" && (k "_gpu" in v) && (("ts_gpu_" k) in v)) { ok = v[k "_gpu"] >= 2 * v["ts_gpu_" k]; line = line sprintf(" %s/ts %s", k, ok ? "ok" : "MISS"); miss += !ok }
    # A host write meets its goal on the CPU, or with the GPU encoding
    # (SetEncodeDevice; Blosc LZ4 only), which the line names.
    if ((k "_write" in v) && (k "_encode" in v)) {
      ok = v[k "_write"] >= 0.9 * v[k "_encode"]; how = ""
      if (!ok && (k "_write_gpu" in v)) { ok = v[k "_write_gpu"] >= 0.9 * v[k "_encode"]; how = " (GPU encoding; CPU " r(k "_write", k "_encode") ")" }
      line = line sprintf(" %s/wr %s%s", k, ok ? "ok" : "MISS", how); miss += !ok
    }
    if ((k "_devwrite" in v) && (k "_encode" in v)) { ok = v[k "_devwrite"] >= 0.9 * v[k "_encode"]; line = line sprintf(" %s/devwr %s", k, ok ? "ok" : "MISS"); miss += !ok }
  }
  printf "goal check (local):%s; %d missed\n", line, miss
  line = ""
  for (i = 2; i <= n; i++) line = line sprintf(" %s %s / %s / %s", c[i], g(c[i] "_gpu_decode_paired"), g(c[i] "_write_encode_paired"), g(c[i] "_devwrite_encode_paired"))
  printf "paired (the median over rounds of each round'"'"'s ratio) gpu/dec / wr/enc / devwr/enc:%s\n", line
  line = ""
  for (i = 2; i <= n; i++) if ((c[i] "_write_rows" in v) && (c[i] "_encode" in v)) line = line sprintf(" %s %s (spread %s; device %s / %s)", c[i], r(c[i] "_write_rows", c[i] "_encode"), r(c[i] "_write", c[i] "_encode"), r(c[i] "_devwrite_rows", c[i] "_encode"), r(c[i] "_devwrite", c[i] "_encode"))
  if (line != "") printf "writes with chunks in C order (-alt-rowwrites) / encode:%s\n", line
  line = ""
  for (i = 2; i <= n; i++) if (c[i] "_devwrite_cpuencode" in v) line = line sprintf(" %s %s GB/s, %s of encode (the GPU encoding %sx it, paired %s)", c[i], g(c[i] "_devwrite_cpuencode"), r(c[i] "_devwrite_cpuencode", c[i] "_encode"), r(c[i] "_devwrite", c[i] "_devwrite_cpuencode"), g(c[i] "_devwrite_devwrite_cpuencode_paired"))
  if (line != "") printf "device writes encoding on the CPU (-alt-cpuencode):%s\n", line
  line = ""
  for (i = 2; i <= n; i++) if (c[i] "_write_gpu" in v) line = line sprintf(" %s %s GB/s, %s of encode (paired %s), %sx the host write encoding on the CPU (paired %s)", c[i], g(c[i] "_write_gpu"), r(c[i] "_write_gpu", c[i] "_encode"), g(c[i] "_write_gpu_encode_paired"), r(c[i] "_write_gpu", c[i] "_write"), g(c[i] "_write_gpu_write_paired"))
  if (line != "") printf "host writes encoding on the GPU (SetEncodeDevice):%s\n", line
  line = ""
  for (i = 2; i <= n; i++) if (c[i] "_gpu_cpuunshuffle" in v) line = line sprintf(" %s %s GB/s, %s of decode (GPU unshuffle %sx it, paired %s)", c[i], g(c[i] "_gpu_cpuunshuffle"), r(c[i] "_gpu_cpuunshuffle", c[i] "_decode"), r(c[i] "_gpu", c[i] "_gpu_cpuunshuffle"), g(c[i] "_gpu_gpu_cpuunshuffle_paired"))
  if (line != "") printf "device reads with the CPU unshuffling (-alt-unshuffle):%s\n", line
}' | tee "$OUT/summary.txt"
s3_summary "$OUT" | tee -a "$OUT/summary.txt"
