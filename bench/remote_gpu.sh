#!/bin/bash
# Remote reads at the server's limit, on the GPU machine: versitygw on
# loopback serving one object of random bytes (1 GiB), then
#   (a) BenchmarkRemoteVariants: kvik's ways of receiving bodies, a read
#       into fresh memory and the device read, taking turns in one process;
#   (b) bench/remote's BenchmarkS3Read: kvik, the AWS SDK transfer manager
#       and one GetObject stream, taking turns in one process;
#   (c) kvik bench --url: the CLI's host, one-stream and device rows;
# and one summary with the ratios asked for: kvik host / SDK transfer
# manager, kvik host / kvik device, CLI / library. Logs under $OUT.
#
# Build here, from the repository root, into a git-ignored folder G (.gpu):
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o G/kvik.test .
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o G/ ./cmd/kvik
#   (cd bench/remote && CGO_ENABLED=0 go test -c -ldflags='-s -w' -o ../../G/remote.test .)
#   GOBIN=$PWD/G CGO_ENABLED=0 go install -ldflags='-s -w' github.com/versity/versitygw/cmd/versitygw@v1.8.0
#   gzip -f G/*     (about 78 MB of binaries, 29 MB gzipped: carry takes 64 MiB)
# then carry G and run, there, from the repository root:
#   bash bench/remote_gpu.sh G
# SIZE (bytes, default 1 GiB), VARIANTS (see SetRemoteVariant), ROUNDS
# (reads per row, default 9) and COUNT (runs of (a) and (b), default 2)
# override. About 3 minutes on 16 cores at the defaults.
set -u
G=$(cd "$1" && pwd)
OUT=${OUT:-/tmp/out}
SIZE=${SIZE:-1073741824}
VARIANTS=${VARIANTS:-default,nowaves,stage1m,waves4,task16m,rcvbuf4m,threads32}
ROUNDS=${ROUNDS:-9}
COUNT=${COUNT:-2}
W=${WORK:-/root/remote-gpu}
R=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT" "$W/bin" "$W/tmp" "$W/s3/bkt"
SUM=$OUT/summary.txt
: > "$SUM"
say() { echo "$*" | tee -a "$SUM"; }

# Binaries: as built, or gzipped.
for b in kvik.test kvik remote.test versitygw; do
  if [ -f "$G/$b.gz" ]; then gunzip -c "$G/$b.gz" > "$W/bin/$b"; else cp "$G/$b" "$W/bin/$b"; fi
  chmod +x "$W/bin/$b"
done
B=$W/bin
export KVIK_TEST_VERSITYGW=$B/versitygw KVIK_BENCH_REMOTE_SIZE=$SIZE TMPDIR=$W/tmp

say "== $(date -u '+%F %T') UTC; $(nvidia-smi -L 2>/dev/null | head -1); $(nproc) CPUs; $(uname -r)"
say "object $SIZE bytes; THP $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"

# (a) the variants, the fresh-memory read and the device read.
echo "== (a) BenchmarkRemoteVariants"
(cd "$R" && KVIK_BENCH_REMOTE_VARIANTS=$VARIANTS timeout 200 "$B/kvik.test" -test.run '^$' \
  -test.bench RemoteVariants -test.benchtime "${ROUNDS}x" -test.count "$COUNT" -test.v) > "$OUT/variants.txt" 2>&1
echo "rc=$?" >> "$OUT/variants.txt"

# (b) kvik against the SDK.
echo "== (b) bench/remote BenchmarkS3Read"
(cd "$R/bench/remote" && timeout 150 "$B/remote.test" -test.run '^$' -test.bench S3Read \
  -test.benchtime "${ROUNDS}x" -test.count "$COUNT") > "$OUT/sdk.txt" 2>&1
echo "rc=$?" >> "$OUT/sdk.txt"

# (c) the CLI against an object of its own server.
echo "== (c) kvik bench --url"
head -c "$SIZE" /dev/urandom > "$W/s3/bkt/obj.bin"
PORT=$((20000 + RANDOM % 20000))
ROOT_ACCESS_KEY=testkey ROOT_SECRET_KEY=testsecret "$B/versitygw" --port "127.0.0.1:$PORT" --keep-alive posix "$W/s3" > "$OUT/versitygw.txt" 2>&1 &
VPID=$!
trap 'kill $VPID 2>/dev/null' EXIT
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
AWS_ACCESS_KEY_ID=testkey AWS_SECRET_ACCESS_KEY=testsecret AWS_DEFAULT_REGION=us-east-1 \
  AWS_ENDPOINT_URL=http://127.0.0.1:$PORT timeout 120 "$B/kvik" bench --url s3://bkt/obj.bin \
  --repeats "$ROUNDS" > "$OUT/cli.txt" 2>&1
echo "rc=$?" >> "$OUT/cli.txt"
kill $VPID 2>/dev/null
rm -f "$W/s3/bkt/obj.bin"

# metric FILE NAME: the values of a benchmark metric, one per count.
metric() { grep '^Benchmark' "$1" | tr '\t' '\n' | awk -v m="$2" '$2 == m { printf "%s ", $1 }'; }
# cli ROW: the CLI's median GB/s for the row whose name starts with ROW.
cli() { awk -v r="$1" 'index($0, r) == 1 { print $(NF) }' "$OUT/cli.txt"; }

say ""
say "== summary (medians over $ROUNDS reads; one value per count; ratios are medians of per-round ratios)"
for f in variants sdk cli; do grep -q '^rc=0' "$OUT/$f.txt" || say "!! $f failed: see $OUT/$f.txt: $(grep -E -- '--- FAIL|panic|Error|error' "$OUT/$f.txt" | head -3)"; done
say "goal 1, kvik host / SDK transfer manager (>= 1.3):  $(metric "$OUT/sdk.txt" kvik/sdk-transfermanager)"
say "        kvik $(metric "$OUT/sdk.txt" kvik-GB/s)GB/s, transfer manager $(metric "$OUT/sdk.txt" sdk-transfermanager-GB/s)GB/s, one GetObject $(metric "$OUT/sdk.txt" sdk-getobject-GB/s)GB/s"
say "goal 2, kvik host / kvik device (>= 1.0):  $(metric "$OUT/variants.txt" default/device)(CLI: host $(cli 'kvik parallel -> host'), device $(cli 'kvik parallel -> device'))"
say "        host $(metric "$OUT/variants.txt" default-GB/s)GB/s, device $(metric "$OUT/variants.txt" device-GB/s)GB/s, fresh memory $(metric "$OUT/variants.txt" cold-GB/s)GB/s"
say "goal 3, CLI vs library, host GB/s (agree within noise):  CLI $(cli 'kvik parallel -> host'), bench/remote $(metric "$OUT/sdk.txt" kvik-GB/s), variants bench $(metric "$OUT/variants.txt" default-GB/s)"
say "        one stream: CLI $(cli 'one GET stream'), SDK GetObject $(metric "$OUT/sdk.txt" sdk-getobject-GB/s)"
say ""
say "variant: GB/s | x default | x device | client cpu-s/GB | server cpu-s/GB"
for v in ${VARIANTS//,/ } cold device; do
  say "  $v: $(metric "$OUT/variants.txt" "$v-GB/s")| $(metric "$OUT/variants.txt" "$v/default")| $(metric "$OUT/variants.txt" "$v/device")| $(metric "$OUT/variants.txt" "$v-cpu-s/GB")| $(metric "$OUT/variants.txt" "$v-server-cpu-s/GB")"
done
