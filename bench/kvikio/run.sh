#!/usr/bin/env bash
# run.sh: build KvikIO's C++ library from a source checkout with our driver
# (kvikio_bench.cpp), then time kvik bench and KvikIO on the same files, cell
# by cell, and print a table of kvik/KvikIO ratios. See README.md.
#
#   bench/kvikio/run.sh build   # only build
#   bench/kvikio/run.sh run     # build if needed, then benchmark
#
# Settings come from the environment (defaults in brackets):
#   KVIKIO_SRC      KvikIO checkout, its root or its cpp/ folder (required)
#   THREAD_POOL_INC folder holding BS_thread_pool.hpp (required)
#   NVTX_INC        folder holding nvtx3/ (NVTX's c/include) (required)
#   CUDA_HOME       [/usr/local/cuda]
#   BUILD           build folder, objects are kept and reused [./build-kvikio]
#   KVIK            kvik binary [kvik on PATH]
#   COMPARE         kvikio-compare binary for the table and the plot
#                   (go build ./bench/kvikio/compare) [none: JSON only]
#   DIR             where the files go [/dev/shm]
#   SIZES           read sizes in MiB [16,64,1024,4096]
#   WRITE_SIZES     device write sizes in MiB [$SIZES]
#   THREADS         read worker counts [1,4,16,32]
#   WRITE_THREADS   write worker counts [16]
#   REPEATS         timed repeats per cell [5]
#   SMALL_REPEATS   timed repeats per read cell of a file under 1 GiB [REPEATS]
#   SMALL_WARMUP    untimed repeats before those [0]
#   OUT             results folder [./kvikio-results]
#   JOBS            parallel compile jobs [nproc]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
BUILD=${BUILD:-$PWD/build-kvikio}
KVIK=${KVIK:-kvik}
COMPARE=${COMPARE:-}
DIR=${DIR:-/dev/shm}
SIZES=${SIZES:-16,64,1024,4096}
WRITE_SIZES=${WRITE_SIZES:-$SIZES}
THREADS=${THREADS:-1,4,16,32}
WRITE_THREADS=${WRITE_THREADS:-16}
REPEATS=${REPEATS:-5}
OUT=${OUT:-$PWD/kvikio-results}
JOBS=${JOBS:-$(nproc)}

die() { echo "run.sh: $*" >&2; exit 1; }

# Sources of KvikIO's library without remote I/O (libcurl, HDFS, URLs, TLS).
remote_re='/(hdfs|remote_handle|tls|url|libcurl)\.cpp$'

build() {
  : "${KVIKIO_SRC:?set KVIKIO_SRC to a KvikIO checkout}"
  : "${THREAD_POOL_INC:?set THREAD_POOL_INC to the folder of BS_thread_pool.hpp}"
  : "${NVTX_INC:?set NVTX_INC to NVTX c/include}"
  local cpp=$KVIKIO_SRC
  [[ -d $cpp/cpp/src ]] && cpp=$cpp/cpp
  [[ -d $cpp/src && -d $cpp/include/kvikio ]] || die "$KVIKIO_SRC: no KvikIO C++ sources (src/, include/kvikio/)"
  [[ -f $THREAD_POOL_INC/BS_thread_pool.hpp ]] || die "$THREAD_POOL_INC: no BS_thread_pool.hpp"
  [[ -f $NVTX_INC/nvtx3/nvtx3.hpp ]] || die "$NVTX_INC: no nvtx3/nvtx3.hpp"
  [[ -f $CUDA_HOME/include/cuda.h ]] || die "$CUDA_HOME/include/cuda.h not found"
  local version=unknown
  for v in "$cpp/../VERSION" "$cpp/VERSION"; do [[ -f $v ]] && version=$(tr -d '[:space:]' <"$v") && break; done

  mkdir -p "$BUILD/include/rapids_logger" "$BUILD/include/kvikio" "$BUILD/obj"
  cp "$here/standin/rapids_logger.hpp" "$BUILD/include/rapids_logger/logger.hpp"
  cp "$here/standin/logger_macros.hpp" "$BUILD/include/kvikio/logger_macros.hpp"
  local defs=()
  if [[ -f $CUDA_HOME/include/cufile.h ]]; then
    defs+=(-DKVIKIO_CUFILE_FOUND)
    grep -q cuFileGetVersion "$CUDA_HOME/include/cufile.h" && defs+=(-DKVIKIO_CUFILE_VERSION_API_FOUND)
  fi
  CXXFLAGS=(-std=gnu++20 -O3 -DNDEBUG -fPIC -pthread "${defs[@]}"
    -I"$BUILD/include" -I"$cpp/include" -I"$THREAD_POOL_INC" -I"$NVTX_INC" -I"$CUDA_HOME/include")
  export CXX=${CXX:-g++}
  local srcs
  srcs=$(cd "$cpp/src" && find . -name '*.cpp' | sort | grep -Ev "$remote_re")
  echo "building KvikIO $version ($(echo "$srcs" | wc -l) sources, ${defs[*]:-no cuFile header}) in $BUILD" >&2
  # Compile each source whose object is missing or older than its inputs.
  # Sources are compiled from copies in BUILD/src: GCC before 14 wants
  # `typename` before a dependent return type of an out-of-class member
  # definition (C++20 made it optional), which the copies gain. A copy is
  # rewritten only when it changes, so objects stay valid between runs.
  local rel
  for rel in $srcs; do
    rel=${rel#./}
    mkdir -p "$BUILD/src/$(dirname "$rel")"
    sed -E 's/^([A-Z][A-Za-z_]*<[A-Za-z_, ]+>::[A-Z][A-Za-z_]*)(&?) /typename \1\2 /' "$cpp/src/$rel" >"$BUILD/src/$rel.tmp"
    if cmp -s "$BUILD/src/$rel.tmp" "$BUILD/src/$rel"; then rm "$BUILD/src/$rel.tmp"; else mv "$BUILD/src/$rel.tmp" "$BUILD/src/$rel"; fi
  done
  echo "$srcs" | sed 's|^\./||' | xargs -P "$JOBS" -I{} bash -c '
    src=$0/{}; obj=$1/obj/$(echo {} | tr / _).o; shift 2
    if [[ ! -f $obj || $src -nt $obj ]]; then "$CXX" "$@" -c "$src" -o "$obj" || exit 255; fi
  ' "$BUILD/src" "$BUILD" "${CXXFLAGS[@]}"
  rm -f "$BUILD/libkvikio.a"
  ar rcs "$BUILD/libkvikio.a" "$BUILD"/obj/*.o
  "$CXX" "${CXXFLAGS[@]}" -DKVIKIO_BENCH_VERSION="\"$version\"" "$here/kvikio_bench.cpp" \
    "$BUILD/libkvikio.a" -ldl -lpthread -o "$BUILD/kvikio_bench"
  echo "built $BUILD/kvikio_bench" >&2
}

# kvik_json runs a kvik bench --json command and appends its report to
# FILE as one line; a failure is reported and the run goes on.
kvik_json() {
  local file=$1 out
  shift
  if out=$("$@"); then
    echo "$out" | tr -d '\n' >>"$file"
    echo >>"$file"
  else
    echo "FAILED: $*" >&2
  fi
}

# kvikio_json runs kvikio_bench and appends its JSON lines to FILE.
kvikio_json() {
  local file=$1
  shift
  "$@" >>"$file" || echo "FAILED: $*" >&2
}

# mib_bytes prints N MiB in bytes.
mib_bytes() { echo $(($1 * 1024 * 1024)); }

run() {
  [[ -x $BUILD/kvikio_bench ]] || build
  command -v "$KVIK" >/dev/null || die "kvik binary $KVIK not found (set KVIK)"
  mkdir -p "$OUT"
  local kv=$OUT/kvik.jsonl kio=$OUT/kvikio.jsonl
  : >"$kv"
  : >"$kio"
  echo "kvik: $KVIK (commit ${KVIK_COMMIT:-unknown}); KvikIO: $BUILD/kvikio_bench" >&2
  local s t f
  # Reads: one cell is a size and a worker count; kvik (device memory,
  # POSIX + bounce buffers, which also times its host path) and KvikIO (host
  # and device) take turns on the same file, the first of the two swapping
  # from cell to cell.
  local turn=0
  for s in ${SIZES//,/ }; do
    f=$DIR/kvik-vs-kvikio-$s-MiB
    "$BUILD/kvikio_bench" --create "$f" --size "$(mib_bytes "$s")"
    cat "$f" >/dev/null # into the page cache
    # Reads of under 1 GiB take a millisecond or two: more repetitions,
    # the same for both tools, so that a median is not one slow start.
    # A fresh process also reads them slower for its first few dozen
    # operations (a 64 MiB read at 4 workers went from 6.4 to 2.5 ms over
    # 30 repetitions, in either tool): SMALL_WARMUP untimed ones first.
    local r=$REPEATS w=0
    ((s < 1024)) && r=${SMALL_REPEATS:-$REPEATS} w=${SMALL_WARMUP:-0}
    for t in ${THREADS//,/ }; do
      echo "read $s MiB, $t workers" >&2
      local kcmd=("$KVIK" bench --file "$f" --op read --memory device --compat on --threads "$t" --repeats "$r" --warmup "$w" --json)
      local icmd=("$BUILD/kvikio_bench" --file "$f" --op read --memory device,host --threads "$t" --repeats "$r" --warmup "$w" --compat on)
      if ((turn++ % 2 == 0)); then
        kvik_json "$kv" "${kcmd[@]}"
        kvikio_json "$kio" "${icmd[@]}"
      else
        kvikio_json "$kio" "${icmd[@]}"
        kvik_json "$kv" "${kcmd[@]}"
      fi
    done
    rm -f "$f"
  done
  # Device writes: each tool writes a new file of its own in DIR.
  for s in ${WRITE_SIZES//,/ }; do
    for t in ${WRITE_THREADS//,/ }; do
      echo "write $s MiB, $t workers" >&2
      f=$DIR/kvik-vs-kvikio-write-$s-MiB
      rm -f "$f"
      kvik_json "$kv" "$KVIK" bench --file "$f" --size "${s}MiB" --op write --memory device --compat on --threads "$t" --repeats "$REPEATS" --json
      rm -f "$f"
      kvikio_json "$kio" "$BUILD/kvikio_bench" --file "$f" --size "${s}M" --op write --memory device --threads "$t" --repeats "$REPEATS" --compat on
      rm -f "$f"
    done
  done
  report
}

report() {
  if [[ -n $COMPARE ]]; then
    "$COMPARE" --kvik "$OUT/kvik.jsonl" --kvikio "$OUT/kvikio.jsonl" --plot "$OUT/kvik-vs-kvikio.svg"
  else
    echo "results in $OUT/kvik.jsonl and $OUT/kvikio.jsonl (set COMPARE for the table)" >&2
  fi
}

case ${1:-run} in
build) build ;;
run) run ;;
report) report ;;
*) die "usage: run.sh [build|run|report]" ;;
esac
