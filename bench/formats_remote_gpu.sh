#!/bin/bash
# Tensor formats from S3 on the GPU machine, in one call (about 2
# minutes): versitygw on loopback serves a 2 GiB safetensors checkpoint.
#  1. BenchmarkS3Load: safetensors.Load of the object onto GPU 0 against
#     RemoteHandle.ReadDevice of the same object into a new allocation,
#     taking turns, 5 rounds; load/read is the ratio of the medians'
#     throughputs (the goal is >= 0.9).
#  2. The CLI on the same kind of object: kvik info and kvik bench --url
#     (the same comparison, 5 rounds taking turns, best and median), then
#     kvik cp s3:// -> GPU -> file, compared with the original.
#  3. The GPU tests of loads from S3 and HTTP (safetensors, npy, kvik cp
#     and bench --url of the CLI).
#
# Build here, from the repository root, into the git-ignored folder G
# (.gpu-fmt, say), gzipped so that G fits the 64 MiB a call carries
# (about 35 MiB; versitygw alone is 43 MiB stripped):
#   G=.gpu-fmt; mkdir -p $G
#   for p in safetensors npy; do CGO_ENABLED=0 go test -c -ldflags='-s -w' -o $G/$p.test ./$p; done
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o $G/cmdkvik.test ./cmd/kvik
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o $G/ ./cmd/kvik
#   GOBIN=/tmp/vgw CGO_ENABLED=0 go install -ldflags='-s -w' github.com/versity/versitygw/cmd/versitygw@v1.8.0
#   cp /tmp/vgw/versitygw $G/ && gzip -f $G/*
# then carry G and run, there: bash bench/formats_remote_gpu.sh G
# (plain binaries in G work too). GB (default 2) sets the checkpoint's
# size in GiB.
set -u
R=$(cd "$(dirname "$0")/.." && pwd)
G=$(mktemp -d /tmp/kvik-bin.XXXX) # the binaries, unpacked
for f in "$1"/*; do
  case $f in
  *.gz) gunzip -c "$f" > "$G/$(basename "$f" .gz)" ;;
  *) cp "$f" "$G/" ;;
  esac
done
chmod +x "$G"/*
OUT=${OUT:-/tmp/out}
GB=${GB:-2}
mkdir -p "$OUT"
L=$OUT/formats_remote.txt
SIZE=$((GB << 30))
export KVIK_TEST_VERSITYGW=$G/versitygw KVIK_TEST_BIN=$G/kvik CI=true
step() { echo "=== $(date -u +%T) $*" | tee -a "$L"; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1 | tee -a "$L"

step "1. BenchmarkS3Load, ${GB} GiB"
(cd "$R/safetensors" && KVIK_BENCH_SIZE=$SIZE timeout 240 "$G/safetensors.test" \
  -test.run '^$' -test.bench '^BenchmarkS3Load$' -test.benchtime 5x 2>&1 | tee -a "$L")

step "2. kvik info, bench --url, cp from S3"
S3=$(mktemp -d /tmp/kvik-s3.XXXX)
mkdir -p "$S3/bkt"
(cd "$R/safetensors" && KVIK_ST_BENCH_FILE=$S3/bkt/model.safetensors KVIK_BENCH_SIZE=$SIZE \
  timeout 120 "$G/safetensors.test" -test.run '^TestWriteBenchCheckpoint$' 2>&1 | tail -1 | tee -a "$L")
PORT=$((20000 + RANDOM % 20000))
ROOT_ACCESS_KEY=k ROOT_SECRET_KEY=s "$G/versitygw" --port 127.0.0.1:$PORT --keep-alive posix "$S3" > "$OUT/versitygw.txt" 2>&1 &
VGW=$!
trap 'kill $VGW 2>/dev/null; rm -rf "$S3" "$G" /dev/shm/kvik-copy.safetensors' EXIT
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
export AWS_ACCESS_KEY_ID=k AWS_SECRET_ACCESS_KEY=s AWS_DEFAULT_REGION=us-east-1 AWS_ENDPOINT_URL=http://127.0.0.1:$PORT
timeout 60 "$G/kvik" info s3://bkt/model.safetensors 2>&1 | head -6 | tee -a "$L"
timeout 180 "$G/kvik" bench --url s3://bkt/model.safetensors --repeats 5 2>&1 | tee -a "$L"
timeout 120 "$G/kvik" cp s3://bkt/model.safetensors /dev/shm/kvik-copy.safetensors 2>&1 | tee -a "$L"
cmp "$S3/bkt/model.safetensors" /dev/shm/kvik-copy.safetensors && echo "copy identical" | tee -a "$L"
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_DEFAULT_REGION AWS_ENDPOINT_URL

step "3. GPU tests of loads from S3 and HTTP"
run() { # NAME PKGDIR PATTERN
  (cd "$R/$2" && timeout 240 "$G/$1.test" -test.v -test.count=1 -test.run "$3" > "$OUT/$1-remote.txt" 2>&1)
  local rc=$?
  printf '%-12s rc=%-3s pass %3d  fail %2d  skip %2d\n' "$1" "$rc" "$(grep -c -- '--- PASS' "$OUT/$1-remote.txt")" \
    "$(grep -c -- '--- FAIL' "$OUT/$1-remote.txt")" "$(grep -c -- '--- SKIP' "$OUT/$1-remote.txt")" | tee -a "$L"
  grep -E -B4 -- '--- FAIL|^panic' "$OUT/$1-remote.txt" | head -30 | tee -a "$L"
  grep -- '--- SKIP' "$OUT/$1-remote.txt" | tee -a "$L"
}
run safetensors safetensors '^(TestRemoteDevice|TestRemoteIndexDevice|TestS3Fixtures|TestHTTPFaults|TestDeviceRoundTrip)$'
run npy npy '^(TestRemoteDevice|TestS3Fixtures|TestDeviceNumpyFiles)$'
run cmdkvik cmd/kvik '^(TestBenchModelURL|TestCpTensorsHTTP|TestCpTensorsS3|TestInfoTensorURLs)$'
step done
