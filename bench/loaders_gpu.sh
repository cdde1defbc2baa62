#!/bin/bash
# GPU-machine run for the safetensors and npy packages: reference files made
# with safetensors/torch/numpy, the Go tests on one and two GPUs over the POSIX
# and cuFile paths, the reverse check (files kvik wrote, loaded by the
# reference libraries) and the load benchmarks of docs/performance.md.
# Build into one folder G beside this script (CGO_ENABLED=0):
#   go test -c -o G/safetensors.test ./safetensors; go test -c -o G/npy.test ./npy
#   go build -o G/ ./cmd/kvik; cp bench/*.py bench/loaders_gpu.sh G/
#   cp -r npy/testdata G/npytd; cp -r shared/gpu G/gpu   (the udev shim)
# then on the GPU machine: bash G/loaders_gpu.sh (logs under $OUT); BENCH=0
# runs the checks only.
G=$(cd "$(dirname "$0")" && pwd)
export PYTHONUNBUFFERED=1
W=/root/xc; mkdir -p $W/st $W/stsmall $W/npy $W/kst $W/knpy $W/tmp
L=$OUT/log.txt
step() { echo "=== $(date -u +%T) $*" | tee -a $L; }
sumtests() { grep -E '^(--- (FAIL|SKIP)|FAIL|ok|PASS)' "$1" | head -40; echo "passed: $(grep -c -- '--- PASS' "$1")  failed: $(grep -c -- '--- FAIL' "$1")  skipped: $(grep -c -- '--- SKIP' "$1")"; }
step env; (nvidia-smi -L; python3 -c 'import safetensors,torch,numpy;print("safetensors",safetensors.__version__,"torch",torch.__version__,"numpy",numpy.__version__)') 2>&1 | tee -a $L
step make reference files
timeout 60 python3 $G/loaders_xcheck.py make-st $W/stsmall --small >>$L 2>&1 || echo MAKE-ST-SMALL FAILED
timeout 60 python3 $G/loaders_xcheck.py make-st $W/st >>$L 2>&1 || echo MAKE-ST FAILED
timeout 60 python3 $G/loaders_xcheck.py make-npy $W/npy >>$L 2>&1 || echo MAKE-NPY FAILED
ls $W/st | wc -l; ls $W/npy | wc -l
cd $W
run_go() { # $1 tag, rest env
  tag=$1; shift
  env "$@" TMPDIR=$W/tmp KVIK_ST_REF_DIR=$W/st KVIK_ST_DEVICE=1 KVIK_ST_XCHECK_OUT=$W/kst timeout 90 $G/safetensors.test -test.v -test.count=1 > $OUT/st-$tag.txt 2>&1; echo "safetensors.test [$tag] rc=$?"; sumtests $OUT/st-$tag.txt
  env "$@" TMPDIR=$W/tmp KVIK_ST_REF_DIR=$W/stsmall KVIK_ST_DEVICE=1 timeout 60 $G/safetensors.test -test.run 'Reference|Index' -test.v > $W/st-small-$tag.txt 2>&1; echo "safetensors.test small fixtures [$tag] rc=$?"; sumtests $W/st-small-$tag.txt
  env "$@" TMPDIR=$W/tmp KVIK_NPY_REF_DIR=$W/npy KVIK_NPY_XCHECK_OUT=$W/knpy timeout 60 $G/npy.test -test.v -test.count=1 > $OUT/npy-$tag.txt 2>&1; echo "npy.test [$tag] rc=$?"; sumtests $OUT/npy-$tag.txt
  env "$@" TMPDIR=$W/tmp KVIK_NPY_REF_DIR=$G/npytd timeout 60 $G/npy.test -test.run 'NumpyFiles' -test.v > $W/npy-committed-$tag.txt 2>&1; echo "npy.test committed fixtures [$tag] rc=$?"; sumtests $W/npy-committed-$tag.txt
}
step go tests POSIX; run_go posix KVIKIO_COMPAT_MODE=on 2>&1 | tee -a $L
step python loads kvik files; (XCHECK_CUDA=1 timeout 60 python3 $G/loaders_xcheck.py check $W/kst; timeout 60 python3 $G/loaders_xcheck.py check $W/knpy) > $OUT/xcheck-posix.txt 2>&1; grep -E '^xcheck' $OUT/xcheck-posix.txt | tee -a $L
step cufile; bash $G/gpu/udev-shim.sh >>$L 2>&1; rm -rf $W/kst/* $W/knpy/*
run_go cufile KVIKIO_COMPAT_MODE=off 2>&1 | tee -a $L
(XCHECK_CUDA=1 timeout 60 python3 $G/loaders_xcheck.py check $W/kst; timeout 60 python3 $G/loaders_xcheck.py check $W/knpy) > $W/xcheck-cufile.txt 2>&1; grep -E '^xcheck' $W/xcheck-cufile.txt | tee -a $L
tar czf $OUT/stsmall.tgz -C $W stsmall
# BENCH=0 stops here: the checks without the 8 GB load benchmarks
# (bench/safetensors_gpu.sh times those, warm and cold, in turns).
[ "${BENCH:-1}" = 0 ] && { step done; exit 0; }
step make 8GB checkpoint
timeout 120 python3 $G/safetensors_peers.py /dev/shm/ckpt.safetensors --make --gb 8 2>&1 | tee -a $L
$G/kvik info /dev/shm/ckpt.safetensors | head -6 | tee -a $L
step warm kvik; KVIKIO_COMPAT_MODE=on timeout 60 $G/kvik bench --safetensors /dev/shm/ckpt.safetensors --repeats 3 2>&1 | tee -a $L
step warm kvik 32 threads; KVIKIO_NTHREADS=32 KVIKIO_COMPAT_MODE=on timeout 60 $G/kvik bench --safetensors /dev/shm/ckpt.safetensors --repeats 3 2>&1 | tee -a $L
step warm peers; timeout 90 python3 $G/safetensors_peers.py /dev/shm/ckpt.safetensors --repeats 2 2>&1 | tee -a $L
step cold; cp /dev/shm/ckpt.safetensors /root/ckpt.safetensors && rm /dev/shm/ckpt.safetensors && sync && echo 3 > /proc/sys/vm/drop_caches
KVIKIO_COMPAT_MODE=on timeout 80 $G/kvik bench --safetensors /root/ckpt.safetensors --drop-cache --repeats 1 2>&1 | tee -a $L
timeout 60 python3 $G/safetensors_peers.py /root/ckpt.safetensors --drop-cache --repeats 1 2>&1 | tee -a $L
step done
