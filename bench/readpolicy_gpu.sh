#!/bin/bash
# GPU-machine run for the read policy figures of docs/performance.md
# (issue 13): cold reads of a 2 GiB ext4 file against the 16-thread O_DIRECT
# ceiling (timed once per invocation, and paired with every repetition),
# a half-cached file under each policy, and the in-process warm A/B of auto
# against buffered reads. Build into one folder G beside this script
# (CGO_ENABLED=0):
#   go build -o G/ ./cmd/kvik; go test -c -o G/kvik.test .; cp bench/readpolicy_gpu.sh G/
# then on the GPU machine: bash G/readpolicy_gpu.sh (logs under $OUT/readpolicy).
# DIR (default /root/kb) must be on a disk file system, not tmpfs; ROUNDS
# (default 3) cold invocations; WARM lists size:rounds of the warm A/B.
G=$(cd "$(dirname "$0")" && pwd)
DIR=${DIR:-/root/kb}
L=$OUT/readpolicy; mkdir -p "$L" "$DIR"
F=$DIR/cold
[ -f "$F" ] || "$G/kvik" bench --file "$F" --size 2GiB --op read --memory host --threads 1 --repeats 1 --no-baselines >/dev/null
for r in $(seq "${ROUNDS:-3}"); do
  echo "== cold $r" >>"$L/cold.txt"
  "$G/kvik" bench --file "$F" --op read --memory device --threads 1,16 --cache cold --repeats 3 >>"$L/cold.txt" 2>&1
  "$G/kvik" bench --file "$F" --op read --memory device --threads 1,16 --cache cold --repeats 3 --paired-ceiling --json >"$L/cold-paired-$r.json"
done
for e in "" KVIKIO_AUTO_DIRECT_IO_READ=0 KVIKIO_AUTO_DIRECT_IO_READ=1; do
  echo "== half '$e'" >>"$L/half.txt"
  env $e "$G/kvik" bench --file "$F" --op read --memory device --threads 1,16 --cache half:64MiB --repeats 3 --no-baselines >>"$L/half.txt" 2>&1
done
for spec in ${WARM:-67108864:200 1073741824:20 4294967296:6}; do
  sz=${spec%%:*} n=${spec##*:}
  KVIK_BENCH_DIR=$DIR KVIK_BENCH_SIZE=$sz KVIK_BENCH_THREADS=1,16 "$G/kvik.test" -test.run '^$' \
    -test.bench ReadPolicyWarm -test.benchtime "${n}x" >"$L/warm-$sz.txt" 2>&1
  rm -f "$DIR/kvik-bench-$sz"
done
grep -hE '^== |^read  (kvik|storage)' "$L/cold.txt" "$L/half.txt"
grep -h Benchmark "$L"/warm-*.txt
for j in "$L"/cold-paired-*.json; do
  python3 -c 'import json,sys
for x in json.load(open(sys.argv[1]))["results"]:
    if x.get("paired_ceiling_gbps"):
        print("paired %-18s %-6s %2d  %.2f GB/s  ceiling %.2f  ratio %.3f" % (x["path"], x["memory"], x["threads"], x["median_gbps"], x["paired_ceiling_gbps"], x["ratio_to_ceiling"]))' "$j"
done
