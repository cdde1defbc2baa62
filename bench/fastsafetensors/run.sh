#!/bin/bash
# fastsafetensors against kvik's safetensors.Load, in one GPU-machine call
# (no network there, no Go): builds fastsafetensors from a source tarball,
# makes an 8 GB transformer-like checkpoint, and times loads onto GPU 0 (and
# onto GPUs 0 and 1, one process per GPU, where there are two) with
# fastsafetensors' bounce-buffer path on tmpfs and its bounce and cuFile
# paths on root ext4 (page cache warm), taking turns with
# `kvik bench --safetensors FILE --repeats N`, round by round. Then a
# summary of every round with the ratios.
#
#   bash bench/fastsafetensors/run.sh G
#
# G (e.g. .gpu) holds kvik (or kvik.xz; built here as bench/gpu_tests.sh
# says), gpu/udev-shim.sh and peer/fastsafetensors.tar.xz (a git archive of
# foundation-model-stack/fastsafetensors; see README.md here). Log:
# $OUT/fastsafetensors.txt; JSON of every run: $OUT/fastsafetensors-json/.
# Settings (environment): ROUNDS (2), REPEATS (3 per round), GB (8),
# FST_THREADS (16, the tuned configuration's copy threads), BUDGET (540:
# seconds after which steps are skipped or cut, so that the summary is
# printed inside a 600 s call), KVIK_COMPAT (on: KVIKIO_COMPAT_MODE for
# kvik), FST_TARBALL, ST_FILE (/dev/shm/ckpt.safetensors), EXT_FILE
# (/root/ckpt.safetensors).
set -u -o pipefail
G=$(cd "${1:?usage: bash bench/fastsafetensors/run.sh GPU_DIR}" && pwd) || exit 2
R=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
L=$OUT/fastsafetensors.txt
J=$OUT/fastsafetensors-json
rm -rf "$J" && mkdir -p "$J"
ROUNDS=${ROUNDS:-2} REPEATS=${REPEATS:-3} GB=${GB:-8} FST_THREADS=${FST_THREADS:-16} BUDGET=${BUDGET:-540}
TARBALL=${FST_TARBALL:-$G/peer/fastsafetensors.tar.xz}
ST=${ST_FILE:-/dev/shm/ckpt.safetensors}
EXT=${EXT_FILE:-/root/ckpt.safetensors}
W=/tmp/fst # build area
LOADPY=$R/bench/fastsafetensors/load.py
export PYTHONUNBUFFERED=1
START=$SECONDS
: >"$L"
NOTES=() # lines for the summary

step() { echo "=== $(date -u +%T) +$((SECONDS - START))s $*" | tee -a "$L"; }
log() { echo "$*" | tee -a "$L"; }
note() { NOTES+=("$*"); log "$*"; }
left() { echo $((BUDGET - (SECONDS - START))); }
# lim SECONDS CMD...: CMD under timeout, cut to the budget left; skipped
# when the budget is spent. Its messages go to stdout (callers tee it).
lim() {
  local s=$1 l rc
  shift
  l=$(left)
  if [ "$l" -lt 15 ]; then
    echo "skipped, budget of ${BUDGET}s spent: $*"
    return 124
  fi
  [ "$s" -gt "$l" ] && s=$l
  timeout -k 5 "$s" "$@"
  rc=$?
  [ $rc = 124 ] && echo "timed out after ${s}s: $*"
  return $rc
}

step preflight
{
  nvidia-smi -L
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda, "GPUs", torch.cuda.device_count())'
  python3 -c 'import numpy, safetensors; print("numpy", numpy.__version__, "safetensors", safetensors.__version__)'
  python3 -m pip --version
  python3 -c 'import setuptools; print("setuptools", setuptools.__version__)'
  python3 -c 'import wheel; print("wheel", wheel.__version__)'
  python3 -c 'import sysconfig, os; p = sysconfig.get_paths()["include"]; print("Python.h:", os.path.join(p, "Python.h"), os.path.exists(os.path.join(p, "Python.h")))'
  echo "compilers: $(command -v g++ c++ gcc | tr '\n' ' ')"
  ls /usr/local/cuda/lib64/libcudart.so* /usr/local/cuda/lib64/libcufile.so* /etc/cufile.json
  echo "root fs: $(stat -f -c %T /) on $(df --output=source / | tail -1); CPUs: $(nproc)"
  free -g | head -2
} 2>&1 | tee -a "$L"
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
note "GPUs: $NGPU"

step kvik binary
KVIK=""
if [ -f "$G/kvik" ]; then
  KVIK=$G/kvik
  [ -x "$KVIK" ] || { cp "$G/kvik" /tmp/kvik-bin && chmod +x /tmp/kvik-bin && KVIK=/tmp/kvik-bin; }
elif [ -f "$G/kvik.xz" ]; then
  if xz -dc "$G/kvik.xz" >/tmp/kvik-bin 2>/dev/null ||
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$G/kvik.xz" /tmp/kvik-bin; then
    chmod +x /tmp/kvik-bin && KVIK=/tmp/kvik-bin
  fi
fi
if [ -n "$KVIK" ]; then
  log "kvik: $KVIK"
  (lim 30 "$KVIK" info) 2>&1 | head -30 | tee -a "$L"
else
  note "no kvik binary ($G/kvik or $G/kvik.xz): fastsafetensors only"
fi

step build fastsafetensors from "$TARBALL"
FST_OK=0 FST_PATH="" FST_LD=""
build() {
  rm -rf "$W" && mkdir -p "$W/src" "$W/pyb/pybind11" "$W/lib" || return 1
  tar -xJf "$TARBALL" -C "$W/src" 2>/dev/null ||
    python3 -c 'import sys, tarfile
t = tarfile.open(sys.argv[1])
try:
    t.extractall(sys.argv[2], filter="data")
except TypeError:
    t.extractall(sys.argv[2])' "$TARBALL" "$W/src" || return 1
  SRC=$(ls -d "$W"/src/*/ | head -1)
  SRC=${SRC%/}
  VER=$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$SRC/pyproject.toml" | head -1)
  echo "source: $SRC (version $VER)"
  # setup.py only needs pybind11's headers: torch ships them.
  local inc
  inc=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "include"))') || return 1
  [ -f "$inc/pybind11/pybind11.h" ] || echo "warning: no $inc/pybind11/pybind11.h"
  : >"$W/pyb/pybind11/__init__.py"
  ln -sfn "$inc" "$W/pyb/pybind11/include"
  if (cd "$SRC" && PYTHONPATH=$W/pyb PIP_BREAK_SYSTEM_PACKAGES=1 lim 240 python3 -m pip install --no-deps --no-build-isolation --no-index .); then
    FST_PATH=""
  else
    echo "pip install failed; building in place (setup.py build_ext --inplace) instead"
    (cd "$SRC" && PYTHONPATH=$W/pyb lim 240 python3 setup.py build_ext --inplace) || return 1
    # fastsafetensors/__init__.py reads its version from the package metadata.
    mkdir -p "$SRC/fastsafetensors-$VER.dist-info" &&
      printf 'Metadata-Version: 2.1\nName: fastsafetensors\nVersion: %s\n' "$VER" >"$SRC/fastsafetensors-$VER.dist-info/METADATA"
    FST_PATH=$SRC
  fi
  # Its extension dlopens "libcudart.so" (unversioned) and "libcufile.so.0":
  # torch's own runtime first (one runtime in the process), then the toolkit's.
  local libs cudart cufile
  libs=$(python3 -c 'import glob, os, torch
base = os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia")
for pat in ("libcudart.so.*[0-9]", "libcufile.so.0"):
    hits = sorted(glob.glob(os.path.join(base, "**", pat), recursive=True))
    print(hits[0] if hits else "-")')
  cudart=$(echo "$libs" | sed -n 1p)
  cufile=$(echo "$libs" | sed -n 2p)
  if [ "$cudart" != "-" ] && [ -n "$cudart" ]; then ln -sfn "$cudart" "$W/lib/libcudart.so"; fi
  if [ ! -e /usr/local/cuda/lib64/libcufile.so.0 ] && [ "$cufile" != "-" ] && [ -n "$cufile" ]; then ln -sfn "$cufile" "$W/lib/libcufile.so.0"; fi
  FST_LD=$W/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  [ "$cudart" = "-" ] && cudart="the toolkit's (/usr/local/cuda/lib64)"
  [ -e "$W/lib/libcufile.so.0" ] || cufile=/usr/local/cuda/lib64/libcufile.so.0
  echo "libraries: libcudart.so -> $cudart; libcufile.so.0 -> $cufile"
  (cd /tmp && PYTHONPATH=$FST_PATH${PYTHONPATH:+:$PYTHONPATH} python3 -c 'import fastsafetensors as f, fastsafetensors.cpp; print("import ok:", f.__version__, f.__file__)')
}
if [ ! -f "$TARBALL" ]; then
  note "no fastsafetensors tarball at $TARBALL: kvik only"
else
  # Not in a pipeline: build sets FST_PATH and FST_LD for the runs.
  build >/tmp/fst-build.log 2>&1
  rc=$?
  tee -a "$L" </tmp/fst-build.log
  if [ $rc = 0 ]; then
    FST_OK=1
    note "fastsafetensors: built ($(tail -1 /tmp/fst-build.log))"
  else
    note "fastsafetensors: build FAILED (exit $rc, see the log above): kvik only"
  fi
fi

if [ $FST_OK = 1 ]; then
  step "probe: fastsafetensors' libraries (FASTSAFETENSORS_ENABLE_INIT_LOG)"
  (cd /tmp && FASTSAFETENSORS_ENABLE_INIT_LOG=1 LD_LIBRARY_PATH=$FST_LD PYTHONPATH=$FST_PATH${PYTHONPATH:+:$PYTHONPATH} lim 60 python3 -c '
import torch
torch.empty(1, device="cuda:0")
import fastsafetensors.cpp as c
c.load_library_functions("")
print("cuda found", c.is_cuda_found(), "cufile found", c.is_cufile_found(), "cufile version", c.cufile_version(), "GDS supported (GPUDirect RDMA attribute)", c.is_gds_supported(0))') 2>&1 | tee -a "$L"
fi

step "make a ${GB} GB checkpoint"
if [ -s "$ST" ]; then
  log "reusing $ST ($(stat -c %s "$ST") bytes)"
else
  (cd "$R" && lim 180 python3 bench/safetensors_peers.py "$ST" --make --gb "$GB") 2>&1 | tee -a "$L"
fi
if [ ! -s "$ST" ]; then
  note "no checkpoint at $ST: nothing to measure"
  exit 1
fi

kv() { # LABEL FILE ROUND
  [ -n "$KVIK" ] || return 0
  local j=$J/kvik_$1_r$3.json
  echo "--- kvik bench --safetensors $2 --repeats $REPEATS (KVIKIO_COMPAT_MODE=${KVIK_COMPAT:-on})" | tee -a "$L"
  KVIKIO_COMPAT_MODE=${KVIK_COMPAT:-on} lim 150 "$KVIK" bench --safetensors "$2" --repeats "$REPEATS" --json >"$j" 2>"$j.err"
  local rc=$?
  cat "$j.err" | tee -a "$L"
  if [ $rc = 0 ]; then
    python3 "$LOADPY" --table "$j" 2>&1 | tail -n +3 | tee -a "$L"
  else
    echo "kvik failed (exit $rc): $(head -c 300 "$j")" | tee -a "$L"
    rm -f "$j"
  fi
}
fst() { # LABEL FILE PATHS CONFIGS GPUS ROUND
  [ $FST_OK = 1 ] || return 0
  local sfx=""
  [ "$5" -gt 1 ] && sfx=_${5}gpu
  echo "--- fastsafetensors $3 ($4) on $5 GPU(s)" | tee -a "$L"
  (cd "$R" && LD_LIBRARY_PATH=$FST_LD PYTHONPATH=$FST_PATH${PYTHONPATH:+:$PYTHONPATH} lim 200 python3 "$LOADPY" "$2" --paths "$3" --configs "$4" \
    --repeats "$REPEATS" --threads "$FST_THREADS" --gpus "$5" --label "$1" --timeout 180 \
    --json "$J/fst_$1${sfx}_r$6.json") 2>&1 | tee -a "$L"
}
# phase LABEL FILE PATHS: ROUNDS rounds of kvik, fastsafetensors on one GPU
# and on two (one process each), the order turning each round.
phase() {
  local label=$1 f=$2 paths=$3 r i n items
  items=(kvik fst1)
  [ "$NGPU" -ge 2 ] && items+=(fst2)
  n=${#items[@]}
  for r in $(seq 1 "$ROUNDS"); do
    if [ "$r" -gt 1 ] && [ "$(left)" -lt 150 ]; then
      note "$label: rounds $r..$ROUNDS skipped ($(left)s of the budget left)"
      break
    fi
    step "$label: round $r of $ROUNDS"
    for i in $(seq 0 $((n - 1))); do
      case ${items[$(((i + r - 1) % n))]} in
      kvik) kv "$label" "$f" "$r" ;;
      fst1) fst "$label" "$f" "$paths" defaults,tuned 1 "$r" ;;
      fst2) fst "$label" "$f" "$paths" tuned 2 "$r" ;;
      esac
    done
  done
}

phase tmpfs "$ST" nogds

step "ext4: copy to $EXT, udev shim for cuFile"
if [ "$(left)" -lt 120 ]; then
  note "ext4 phase skipped ($(left)s of the budget left)"
else
  (lim 120 cp "$ST" "$EXT" && lim 60 sync) 2>&1 | tee -a "$L"
  log "$EXT on $(stat -f -c %T "$(dirname "$EXT")")"
  if [ -f "$G/gpu/udev-shim.sh" ]; then
    bash "$G/gpu/udev-shim.sh" 2>&1 | tee -a "$L"
  else
    note "no $G/gpu/udev-shim.sh: cuFile may refuse the file"
  fi
  if [ -s "$EXT" ]; then
    phase ext4 "$EXT" nogds,gds
  else
    note "ext4 phase skipped: no $EXT"
  fi
  rm -f "$EXT"
fi

step summary
{
  echo "==== fastsafetensors vs kvik: notes ===="
  for n in "${NOTES[@]}"; do echo "  $n"; done
  python3 "$LOADPY" --summary "$J"/*.json
  echo "elapsed: $((SECONDS - START))s; log $L; JSON $J"
} 2>&1 | tee -a "$L"
