#!/bin/bash
# Uploads at the library's speed, on the GPU machine: versitygw on
# loopback with its root on tmpfs, random bytes (SIZE, default 2 GiB)
# uploaded from host memory and from GPU 0's memory, in one process,
# the paths taking turns (bench/remote's BenchmarkS3Upload):
#   kvik.UploadS3, kvik.SaveFile (64 pieces), safetensors.Save (64
#   tensors), kvik.UploadFileS3 (a tmpfs file), UploadS3Device, SaveFile
#   of device pieces, safetensors.Save of device tensors, the CLI (kvik cp --verify=false FILE s3://, its
#   own upload figure), and the AWS SDK for Go v2 transfer manager with
#   the same part size and concurrency;
# at two settings: 16 x 8 MiB parts and 32 x 64 MiB parts; then one
# verified kvik cp FILE s3:// to show the upload and read-back figures
# apart. One summary with the ratios asked for: path / SDK (>= 1.0) and
# CLI / library (>= 0.9). Logs under $OUT.
#
# Build here, from the repository root, into a git-ignored folder G (.gpu):
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o G/ ./cmd/kvik
#   (cd bench/remote && CGO_ENABLED=0 go test -c -ldflags='-s -w' -o ../../G/remote.test .)
#   GOBIN=$PWD/G CGO_ENABLED=0 go install -ldflags='-s -w' github.com/versity/versitygw/cmd/versitygw@v1.8.0
# and, to run the GPU tests of the upload path first (optional):
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o G/kvik.test .
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o G/safetensors.test ./safetensors
#   gzip -f G/*     (carry takes 64 MiB)
# then carry G and run, there, from the repository root:
#   bash bench/upload_gpu.sh G
# SIZE (bytes), ROUNDS (uploads per path and setting, default 5), COUNT
# (runs per setting, default 1), SETS (the settings, "workers part-bytes"
# separated by commas; default "16 8388608,32 67108864") and WORK (a tmpfs folder, default
# /dev/shm/upload-gpu) override. About 6 minutes on 16 cores at the
# defaults (10 paths x 6 rounds x 2 settings x 2 GiB at ~1.2 GB/s).
set -u
G=$(cd "$1" && pwd)
OUT=${OUT:-/tmp/out}
SIZE=${SIZE:-2147483648}
ROUNDS=${ROUNDS:-5}
COUNT=${COUNT:-1}
W=${WORK:-/dev/shm/upload-gpu}
R=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT" "$W/bin" "$W/tmp" "$W/s3/bkt"
SUM=$OUT/summary.txt
: > "$SUM"
say() { echo "$*" | tee -a "$SUM"; }

for b in kvik remote.test versitygw kvik.test safetensors.test; do
  if [ -f "$G/$b.gz" ]; then gunzip -c "$G/$b.gz" > "$W/bin/$b"; elif [ -f "$G/$b" ]; then cp "$G/$b" "$W/bin/$b"; else continue; fi
  chmod +x "$W/bin/$b"
done
B=$W/bin
# TMPDIR on tmpfs: versitygw's root (the bench's temp dir) and the CLI's source file.
export KVIK_TEST_VERSITYGW=$B/versitygw KVIK_BENCH_CLI=$B/kvik KVIK_BENCH_REMOTE_SIZE=$SIZE TMPDIR=$W/tmp

say "== $(date -u '+%F %T') UTC; $(nvidia-smi -L 2>/dev/null | head -1); $(nproc) CPUs; $(uname -r)"
say "object $SIZE bytes; $(df -h "$W" | tail -1 | awk '{print $1, $2, "free", $4}')"

# metric FILE NAME: the values of a benchmark metric, one per count.
metric() { grep '^Benchmark' "$1" | tr '\t' '\n' | awk -v m="$2" '$2 == m { printf "%s ", $1 }'; }

# The GPU tests of the upload path, when their binaries came along.
if [ -x "$B/kvik.test" ]; then
  echo "== GPU tests of the upload path"
  { (cd "$R" && timeout 240 "$B/kvik.test" -test.v -test.count=1 \
      -test.run 'TestRemoteDeviceUpload|TestSaveFileDevicePieces|TestPipeBody|TestUploadCRC32C|TestUploadFileS3'); echo "rc=$?"
    (cd "$R/safetensors" && timeout 120 "$B/safetensors.test" -test.v -test.count=1 -test.run 'TestS3SaveDevice'); echo "rc=$?"
  } > "$OUT/gpu-tests.txt" 2>&1
fi

IFS=, read -r -a sets <<< "${SETS:-16 8388608,32 67108864}"
for set in "${sets[@]}"; do
  read -r threads task <<< "$set"
  tag=t${threads}-p$((task >> 20))m
  echo "== BenchmarkS3Upload $threads workers x $((task >> 20)) MiB parts"
  (cd "$R/bench/remote" && KVIKIO_NTHREADS=$threads KVIKIO_TASK_SIZE=$task timeout 280 "$B/remote.test" \
    -test.run '^$' -test.bench S3Upload -test.benchtime "${ROUNDS}x" -test.count "$COUNT" -test.v) > "$OUT/upload-$tag.txt" 2>&1
  echo "rc=$?" >> "$OUT/upload-$tag.txt"
done

# A verified copy by the CLI: the upload and the read-back reported apart.
echo "== kvik cp FILE s3:// (verified)"
head -c "$SIZE" /dev/urandom > "$W/tmp/cp-src.bin"
PORT=$((20000 + RANDOM % 20000))
ROOT_ACCESS_KEY=testkey ROOT_SECRET_KEY=testsecret "$B/versitygw" --port "127.0.0.1:$PORT" --keep-alive posix "$W/s3" > "$OUT/versitygw.txt" 2>&1 &
VPID=$!
trap 'kill $VPID 2>/dev/null' EXIT
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
for i in 1 2 3; do
  AWS_ACCESS_KEY_ID=testkey AWS_SECRET_ACCESS_KEY=testsecret AWS_DEFAULT_REGION=us-east-1 \
    AWS_ENDPOINT_URL=http://127.0.0.1:$PORT KVIKIO_NTHREADS=16 KVIKIO_TASK_SIZE=8388608 \
    timeout 120 "$B/kvik" cp "$W/tmp/cp-src.bin" s3://bkt/cp.bin
  echo "rc=$?"
done > "$OUT/cli-verified.txt" 2>&1
kill $VPID 2>/dev/null
rm -rf "$W/tmp/cp-src.bin" "$W/s3/bkt/cp.bin"

say ""
say "== summary (medians over $ROUNDS rounds; one value per count; ratios are medians of per-round ratios)"
for f in "$OUT"/upload-t*.txt; do
  t=$(basename "$f" .txt)
  grep -q '^rc=0' "$f" || say "!! $t failed: see $f: $(grep -E -- '--- FAIL|panic|Error|error' "$f" | head -3)"
  say "-- $t ($(grep -o 'concurrency [0-9]*, part size [0-9]*' "$f" | head -1))"
  grep -o 'device paths: left out: .\{0,80\}' "$f" | head -1 | while read -r l; do say "   $l"; done
  say "   path: GB/s | best GB/s | x SDK transfer manager (goal >= 1.0)"
  for p in sdk kvik savefile safetensors kvik-file kvik-device savefile-device safetensors-device cli; do
    v=$(metric "$f" "$p-GB/s")
    [ -n "$v" ] && say "   $p: $v| $(metric "$f" "$p-best-GB/s")| $(metric "$f" "$p/sdk")"
  done
  say "   CLI upload figure / kvik.UploadS3 (goal >= 0.9): $(metric "$f" cli/kvik)"
done
if [ -f "$OUT/gpu-tests.txt" ]; then
  say "-- GPU tests: $(grep -c -- '--- PASS' "$OUT/gpu-tests.txt") passed, $(grep -c -- '--- FAIL' "$OUT/gpu-tests.txt") failed, $(grep -c -- '--- SKIP' "$OUT/gpu-tests.txt") skipped; $(grep '^rc=' "$OUT/gpu-tests.txt" | tr '\n' ' ')"
  grep -E -- '--- (FAIL|SKIP)' "$OUT/gpu-tests.txt" | while read -r l; do say "   $l"; done
fi
say "-- kvik cp FILE s3:// verified, 16 x 8 MiB parts:"
grep -E '^copied|rc=' "$OUT/cli-verified.txt" | while read -r l; do say "   $l"; done
