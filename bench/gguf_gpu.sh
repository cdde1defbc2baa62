#!/bin/bash
# GGUF on the GPU machine in one call (about 5 minutes): the gguf tests and
# the reverse check (files kvik saved from device memory, read by gguf-py's
# GGUFReader) without and with the udev shim, then the load benchmark of
# docs/performance.md: an 8 GB llama-like GGUF (F16/BF16, Q4_K, Q8_0) in
# /dev/shm (so in the page cache), gguf.Load onto GPU 0 against
# kvik.ReadFileToDevice of the same file (taking turns, 5 repetitions,
# medians), and the Python path a user has today (gguf-py's GGUFReader +
# torch.from_numpy(t.data).cuda() per tensor, 3 repetitions).
#
# Build here, from the repository root, into the git-ignored folder .gpu:
#   CGO_ENABLED=0 go test -c -o .gpu/gguf.test ./gguf
#   CGO_ENABLED=0 go build -o .gpu/ ./cmd/kvik
#   GOBIN=$PWD/.gpu CGO_ENABLED=0 go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
#   cp -r /work/gguf-py .gpu/gguf-py    # gguf-py's gguf/ package (gguf/testdata/SOURCE.md)
#   cp -r ../shared/gpu .gpu/gpu         # the udev shim
# then carry .gpu and run there: bash bench/gguf_gpu.sh .gpu
# (logs under $OUT). GB (default 8) sizes the model; BENCH=0 runs the
# checks only.
set -u
G=$(cd "$1" && pwd)
R=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
W=/root/gguf-xc
mkdir -p "$OUT" "$W"
export PYTHONUNBUFFERED=1 PYTHONPATH=${GGUF_PY:-$G/gguf-py} KVIK_TEST_VERSITYGW=$G/versitygw CI=true
L=$OUT/gguf.txt
step() { echo "=== $(date -u +%T) $*" | tee -a "$L"; }
sumtests() { grep -E -- '--- (FAIL|SKIP)|^(FAIL|ok|PASS|panic)' "$1" | head -20; echo "passed: $(grep -c -- '--- PASS' "$1")  failed: $(grep -c -- '--- FAIL' "$1")  skipped: $(grep -c -- '--- SKIP' "$1")"; }
step env; (nvidia-smi -L; python3 -c 'import numpy, torch, gguf; print("numpy", numpy.__version__, "torch", torch.__version__, "gguf-py", gguf.__file__)') 2>&1 | tee -a "$L"
for way in noshim shim; do
  if [ "$way" = shim ]; then bash "$G/gpu/udev-shim.sh" >> "$L" 2>&1; else rm -rf /run/udev; fi
  step "gguf tests, $way"
  rm -rf "$W/$way" && mkdir -p "$W/$way" "$W/tmp"
  (cd "$R/gguf" && TMPDIR=$W/tmp KVIK_GGUF_XCHECK_OUT=$W/$way timeout 300 "$G/gguf.test" -test.v -test.count=1 > "$OUT/gguf-$way.txt" 2>&1)
  echo "gguf.test [$way] rc=$?" | tee -a "$L"; sumtests "$OUT/gguf-$way.txt" | tee -a "$L"
  step "reverse check, $way"
  timeout 60 python3 "$R/gguf/testdata/xcheck.py" "$W/$way" 2>&1 | tee -a "$L"
done
[ "${BENCH:-1}" = 0 ] && { step done; exit 0; }
export KVIKIO_COMPAT_MODE=on # the POSIX path (tmpfs), as bench/safetensors_gpu.sh
step "make a ${GB:-8} GB model"
(cd "$R/gguf" && KVIK_GGUF_MAKE=/dev/shm/model.gguf KVIK_GGUF_GB=${GB:-8} timeout 180 "$G/gguf.test" -test.run '^TestMakeSynthetic$' -test.v 2>&1 | tail -3 | tee -a "$L")
"$G/kvik" info /dev/shm/model.gguf | head -7 | tee -a "$L"
step "kvik: gguf.Load against ReadFileToDevice"
timeout 150 "$G/kvik" bench --gguf /dev/shm/model.gguf --repeats 5 --json > "$OUT/kvik.json" 2>> "$L"
step "Python: gguf-py + torch"
timeout 240 python3 "$R/bench/gguf_peers.py" /dev/shm/model.gguf --repeats 3 --json > "$OUT/python.json" 2>> "$L"
python3 - "$OUT/kvik.json" "$OUT/python.json" <<'PY' | tee -a "$L"
import json, sys
rows = json.load(open(sys.argv[1])) + [json.load(open(sys.argv[2]))]
base, load = rows[0], rows[1]
for r in rows:
    print("  %-48s median %7.3f s %6.2f GB/s   best %7.3f s %6.2f GB/s" % (r["name"], r["median_seconds"], r["median_gb_per_s"], r["best_seconds"], r["gb_per_s"]))
print("gguf.Load / ReadFileToDevice: %.3fx (medians), %.3fx (best)" % (base["median_seconds"] / load["median_seconds"], base["best_seconds"] / load["best_seconds"]))
py = rows[-1]
print("gguf.Load / Python path: %.1fx (medians), %.1fx (best)" % (py["median_seconds"] / load["median_seconds"], py["best_seconds"] / load["best_seconds"]))
PY
rm -f /dev/shm/model.gguf
step done
