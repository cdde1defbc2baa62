#!/bin/bash
# Every package's tests on the GPU machine, two ways: without the udev shim
# (no /run/udev: cuFile refuses file handles and Auto picks the POSIX
# path) and with it (cuFile, in its compatibility mode, serves files on the
# root ext4 disk). Logs and a summary go under $OUT.
#
# Build here, from the repository root, into the git-ignored folder G:
#   for p in . cmd/kvik cuda cufile zarr safetensors npy gguf internal/formatkit/tensorload; do
#     CGO_ENABLED=0 go test -c -ldflags=-s -o G/NAME.test ./$p; done   # NAME: kvik, cmdkvik, cuda, ...
#   CGO_ENABLED=0 go build -ldflags=-s -o G/ ./cmd/kvik
#   GOBIN=$PWD/G CGO_ENABLED=0 go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
#   cp -r ../shared/gpu G/gpu
# then carry G and run, there: bash bench/gpu_tests.sh G [WAYS]
# WAYS is "noshim shim" (the default) or one of them; PKGS (NAME:DIR ...)
# runs a subset of the packages.
set -u
G=$(cd "$1" && pwd)
WAYS=${2:-noshim shim}
R=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# No zarr-python there (the zarr interop test runs in CI, which has it);
# TensorStore is, and zarr's TestTensorStoreInterop finds it through
# python3 (KVIK_TEST_TENSORSTORE names another interpreter, or "skip").
export KVIK_TEST_BIN=$G/kvik KVIK_TEST_VERSITYGW=$G/versitygw CI=true KVIK_TEST_ZARR_PYTHON=skip
pkgs=${PKGS:-"kvik:. cmdkvik:cmd/kvik cuda:cuda cufile:cufile zarr:zarr safetensors:safetensors npy:npy gguf:gguf tensorload:internal/formatkit/tensorload"}
summary=$OUT/summary.txt
for way in $WAYS; do
  if [ "$way" = shim ]; then
    bash "$G/gpu/udev-shim.sh" > "$OUT/shim.txt" 2>&1
  else
    rm -rf /run/udev
  fi
  export KVIK_TEST_DIR=/root/kt-$way
  mkdir -p "$KVIK_TEST_DIR"
  for p in $pkgs; do
    n=${p%%:*} dir=${p#*:}
    log=$OUT/$way-$n.txt
    start=$(date +%s)
    (cd "$R/$dir" && TMPDIR=$KVIK_TEST_DIR timeout 420 "$G/$n.test" -test.v -test.count=1 > "$log" 2>&1)
    rc=$?
    printf '%-7s %-12s rc=%-3s pass %3d  fail %2d  skip %2d  %3ds\n' "$way" "$n" "$rc" \
      "$(grep -c -- '--- PASS' "$log")" "$(grep -c -- '--- FAIL' "$log")" \
      "$(grep -c -- '--- SKIP' "$log")" $(($(date +%s) - start)) | tee -a "$summary"
    grep -E -- '--- FAIL|^panic|^FAIL' "$log" | head -20 | sed 's/^/    /' | tee -a "$summary"
  done
done
# The skips, each with its reason (the log line just above it in -v output).
for log in "$OUT"/noshim-*.txt "$OUT"/shim-*.txt; do
  [ -f "$log" ] || continue
  grep -B1 -- '--- SKIP' "$log" | grep -v -- '^--$' | paste - - | sed "s|^|$(basename "$log" .txt) |; s/  */ /g"
done | sort -u > "$OUT/skips.txt"
