#!/bin/bash
# The cells of docs/performance.md's table that no other script measures,
# in one GPU-machine call (3-4 minutes on 16 cores; ROUNDS=2 5-6):
# a safetensors checkpoint, a GGUF model and a .npy array of GB each
# (default 4) in /dev/shm, served also by versitygw on loopback, then
#   - loads into host memory from the file and from S3 (bench/loadbench:
#     LoadHost against the plain read of the same file or object), and
#     .npy onto GPU 0 from both (npy.Load against the plain device read);
#   - safetensors and GGUF onto GPU 0 from the file and from S3 (kvik
#     bench --safetensors, --gguf, --url: Load against ReadFileToDevice or
#     RemoteHandle.ReadDevice);
#   - the Python peers of the local ones: safetensors.torch.load_file and
#     safe_open (cpu, cuda:0), numpy.load (and + torch .to("cuda:0")),
#     gguf-py's GGUFReader (+ np.array per tensor, or + torch .cuda());
#   - RemoteHandle.ReadDevice against the AWS SDK's transfer manager into
#     pinned memory plus one copy (bench/remote BenchmarkS3ReadDevice);
#   - MmapHandle host and device reads, registered or not, against
#     FileHandle's and the pinned copy (the PCIe ceiling), 4 GiB.
# Each kvik row beside its peer and ceiling, all in this call; the summary
# table is printed last (also in $OUT/paths.txt), every timing in
# $OUT/results.json. Zarr is measured by bench/zarr_local_gpu.sh.
#
# Build here, from the repository root, into the git-ignored folder G
# (.gpu-paths, say):
#   G=.gpu-paths; mkdir -p $G
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o $G/ ./cmd/kvik ./bench/loadbench
#   for p in kvik:. gguf:gguf; do CGO_ENABLED=0 go test -c -ldflags='-s -w' -o $G/${p%%:*}.test ./${p#*:}; done
#   (cd bench/remote && CGO_ENABLED=0 go test -c -ldflags='-s -w' -o ../../$G/remote.test .)
#   GOBIN=/tmp/vgw CGO_ENABLED=0 go install -ldflags='-s -w' github.com/versity/versitygw/cmd/versitygw@v1.8.0
#   cp /tmp/vgw/versitygw $G/ && gzip -f $G/*
#   cp -r /path/to/gguf-py $G/gguf-py   # gguf-py's gguf/ package (gguf/testdata/SOURCE.md)
# (about 35 MB gzipped; without gguf-py the GGUF rows have no Python peer),
# then carry G and run, there: bash bench/paths_gpu.sh G
# GB (default 4) sizes the files; ROUNDS (default 1) repeats the kvik and
# Python steps, taking turns; REPEATS (default 5) times each kvik row.
set -u
G=$(cd "$1" && pwd)
R=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
GB=${GB:-4} ROUNDS=${ROUNDS:-1} REPEATS=${REPEATS:-5}
W=/dev/shm/kvik-paths
B=$W/bin J=$W/json D=$W/s3/bkt
rm -rf "$W" && mkdir -p "$OUT" "$B" "$J" "$D" "$W/tmp"
for f in "$G"/*; do
  case $f in
  *.gz) gunzip -c "$f" > "$B/$(basename "$f" .gz)" ;;
  *) [ -f "$f" ] && cp "$f" "$B/" ;;
  esac
done
chmod +x "$B"/*
export PYTHONUNBUFFERED=1 KVIKIO_COMPAT_MODE=on TMPDIR=$W/tmp KVIK_TEST_VERSITYGW=$B/versitygw
export PYTHONPATH=${GGUF_PY:-$G/gguf-py}
L=$OUT/paths.txt
step() { echo "=== $(date -u +%T) $*" | tee -a "$L"; }
step "machine: $(nvidia-smi -L | head -1); $(nproc) CPUs; $(python3 -c 'import numpy, torch, safetensors; print("numpy", numpy.__version__, "torch", torch.__version__, "safetensors", safetensors.__version__)' 2>&1)"
GGUFPY=1
(cd / && python3 -c 'from gguf import GGUFReader' 2>/dev/null) || { GGUFPY=0; step "no gguf-py (set GGUF_PY or carry G/gguf-py): the GGUF rows go without their Python peer"; }

step "make the files, ${GB} GB each"
ST=$D/model.safetensors GG=$D/model.gguf NP=$D/array.npy
timeout 150 python3 "$R/bench/safetensors_peers.py" "$ST" --make --gb "$GB" 2>&1 | tail -1 | tee -a "$L"
(cd "$R/gguf" && KVIK_GGUF_MAKE=$GG KVIK_GGUF_GB=$GB timeout 120 "$B/gguf.test" -test.run '^TestMakeSynthetic$' -test.v 2>&1 | grep -E 'tensors|FAIL' | tee -a "$L")
timeout 120 python3 "$R/bench/npy_peers.py" "$NP" --make --gb "$GB" 2>&1 | tail -1 | tee -a "$L"

PORT=$((20000 + RANDOM % 20000))
ROOT_ACCESS_KEY=k ROOT_SECRET_KEY=s "$B/versitygw" --port "127.0.0.1:$PORT" --keep-alive posix "$W/s3" > "$OUT/versitygw.txt" 2>&1 &
VGW=$!
trap 'kill $VGW 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
S3="AWS_ACCESS_KEY_ID=k AWS_SECRET_ACCESS_KEY=s AWS_DEFAULT_REGION=us-east-1 AWS_ENDPOINT_URL=http://127.0.0.1:$PORT"

# run ROW WHO SECONDS COMMAND...: COMMAND's JSON into $J/ROW.WHO.rN.json (WHO:
# kvik or peer), its stderr into the log.
run() {
  local row=$1 who=$2 secs=$3
  shift 3
  timeout "$secs" env $S3 "$@" > "$J/$row.$who.r$r.json" 2>> "$L" || echo "!! $row, $who failed (rc $?)" | tee -a "$L"
}
kvik_rows() {
  step "round $r: kvik"
  for f in "$ST" "$GG" "$NP"; do
    run "$(basename "$f" | tr . -)-local-host" kvik 60 "$B/loadbench" -memory host -repeats "$REPEATS" "$f"
    run "$(basename "$f" | tr . -)-s3-host" kvik 90 "$B/loadbench" -memory host -repeats "$REPEATS" "s3://bkt/$(basename "$f")"
  done
  run array-npy-local-gpu kvik 60 "$B/loadbench" -memory device -repeats "$REPEATS" "$NP"
  run array-npy-s3-gpu kvik 90 "$B/loadbench" -memory device -repeats "$REPEATS" s3://bkt/array.npy
  run model-safetensors-local-gpu kvik 60 "$B/kvik" bench --safetensors "$ST" --repeats "$REPEATS" --json
  run model-gguf-local-gpu kvik 60 "$B/kvik" bench --gguf "$GG" --repeats "$REPEATS" --json
  run model-safetensors-s3-gpu kvik 90 "$B/kvik" bench --url s3://bkt/model.safetensors --repeats "$REPEATS" --json
  run model-gguf-s3-gpu kvik 90 "$B/kvik" bench --url s3://bkt/model.gguf --repeats "$REPEATS" --json
}
python_rows() {
  step "round $r: Python peers"
  run model-safetensors-local-host peer 120 python3 "$R/bench/safetensors_peers.py" "$ST" --device cpu --repeats 3 --json
  run model-safetensors-local-gpu peer 120 python3 "$R/bench/safetensors_peers.py" "$ST" --repeats 3 --json
  run array-npy-local-host peer 60 python3 "$R/bench/npy_peers.py" "$NP" --repeats 3 --json
  run array-npy-local-gpu peer 60 python3 "$R/bench/npy_peers.py" "$NP" --device cuda:0 --repeats 3 --json
  if [ $GGUFPY = 1 ]; then
    run model-gguf-local-host peer 90 python3 "$R/bench/gguf_peers.py" "$GG" --host --repeats 3 --json
    run model-gguf-local-gpu peer 90 python3 "$R/bench/gguf_peers.py" "$GG" --repeats 3 --json
  fi
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then kvik_rows; python_rows; else python_rows; kvik_rows; fi
done
for f in "$J"/*.json; do [ -s "$f" ] || rm -f "$f"; done # failed runs

step "RemoteHandle.ReadDevice against the SDK transfer manager + copy, 1 GiB"
(cd "$R/bench/remote" && KVIK_BENCH_REMOTE_SIZE=1073741824 timeout 90 "$B/remote.test" -test.run '^$' \
  -test.bench '^BenchmarkS3ReadDevice$' -test.benchtime 9x -test.v > "$OUT/sdk-device.txt" 2>&1)
echo "rc=$?" >> "$OUT/sdk-device.txt"

step "MmapHandle and FileHandle, 4 GiB page-cached file, and the pinned copy"
(cd "$R" && KVIK_BENCH_DIR=$W KVIK_BENCH_SIZE=4294967296 timeout 120 "$B/kvik.test" -test.run '^$' \
  -test.bench '^Benchmark(MmapRead|MmapReadDevice|PinnedCopy)$' -test.benchtime 5x -test.count 2 > "$OUT/mmap.txt" 2>&1)
echo "rc=$?" >> "$OUT/mmap.txt"

step summary
python3 - "$J" "$OUT" "$ST" "$GG" "$NP" <<'PY' | tee -a "$L"
import glob, json, os, re, statistics, sys
J, OUT, files = sys.argv[1], sys.argv[2], {"model-safetensors": sys.argv[3], "model-gguf": sys.argv[4], "array-npy": sys.argv[5]}
runs = {}  # row -> config name -> seconds, pooled over the files of the row
dec = json.JSONDecoder()
for f in sorted(glob.glob(J + "/*.json")):
    row = re.sub(r"\.(kvik|peer)\.r\d+\.json$", "", os.path.basename(f))
    text, i = open(f).read(), 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            break
        x, i = dec.raw_decode(text, i)
        res = x["results"] if isinstance(x, dict) and "results" in x else x if isinstance(x, list) else [x]
        for e in res:
            runs.setdefault(row, {}).setdefault(e["name"], []).extend(e["seconds"])
json.dump(runs, open(OUT + "/results.json", "w"), indent=1)
def rate(row, name):
    s = runs.get(row, {}).get(name)
    if not s:
        return None
    size = os.path.getsize(files[row.rsplit("-", 2)[0]])
    return size / min(s) / 1e9, size / statistics.median(s) / 1e9
def line(what, kvik, others):
    k = kvik and rate(*kvik)
    if not k:
        print("%-34s (missing)" % what)
        return
    cells = []
    for label, o in others:
        v = o and rate(*o)
        cells.append("%s %s" % (label, "%.2f (%.2f) = %.2fx (%.2fx)" % (v[0], v[1], k[0] / v[0], k[1] / v[1]) if v else "missing"))
    print("%-34s %6.2f (%6.2f) | %s" % (what, k[0], k[1], "; ".join(cells)))
print("row: kvik GB/s best (median) | against, in this call: GB/s best (median) = kvik / it")
R = lambda f, src, mem: "%s-%s-%s" % (f, src, mem)
for f, fmt in (("model-safetensors", "safetensors"), ("model-gguf", "gguf"), ("array-npy", "npy")):
    peer_host = {"safetensors": "safetensors.torch.load_file cpu", "gguf": "gguf-py GGUFReader + np.array per tensor", "npy": "numpy.load"}[fmt]
    peer_gpu = {"safetensors": "safetensors.torch.load_file cuda:0", "gguf": "gguf-py GGUFReader + torch .cuda() per tensor", "npy": "numpy.load + torch .to(cuda:0)"}[fmt]
    load_gpu = fmt + (".Load" if fmt == "npy" else ".Load gpu0")
    gpu_read = "read into GPU memory" if fmt == "npy" else "kvik.ReadFileToDevice"
    s3_read = "read into GPU memory" if fmt == "npy" else "RemoteHandle.ReadDevice"
    line(fmt + ", local file -> host", (R(f, "local", "host"), fmt + ".LoadHost"),
         [("peer " + peer_host, (R(f, "local", "host"), peer_host)), ("ceiling: read", (R(f, "local", "host"), "read into host memory"))])
    line(fmt + ", local file -> GPU", (R(f, "local", "gpu"), load_gpu),
         [("peer " + peer_gpu, (R(f, "local", "gpu"), peer_gpu)), ("ceiling: read", (R(f, "local", "gpu"), gpu_read))])
    line(fmt + ", S3 -> host", (R(f, "s3", "host"), fmt + ".LoadHost"), [("ceiling: read", (R(f, "s3", "host"), "read into host memory"))])
    line(fmt + ", S3 -> GPU", (R(f, "s3", "gpu"), load_gpu), [("ceiling: read", (R(f, "s3", "gpu"), s3_read))])
def metrics(path):
    out = {}
    for l in open(path):
        if l.startswith("Benchmark"):
            name = re.sub(r"-\d+$", "", l.split()[0])
            f = l.split()
            for v, unit in zip(f[2::2], f[3::2]):
                out.setdefault(name, {}).setdefault(unit, []).append(float(v))
    return out
m = metrics(OUT + "/sdk-device.txt").get("BenchmarkS3ReadDevice", {})
if m:
    print("%-34s %6.2f best %.2f | SDK transfer manager + copy %.2f best %.2f; kvik/sdk %.2fx (median of rounds)" % (
        "RemoteHandle, S3 -> GPU (1 GiB)", m["kvik-GB/s"][0], m["kvik-best-GB/s"][0], m["sdk-transfermanager+copy-GB/s"][0],
        m["sdk-transfermanager+copy-best-GB/s"][0], m["kvik/sdk-transfermanager+copy"][0]))
else:
    print("RemoteHandle, S3 -> GPU: missing (see sdk-device.txt)")
m = metrics(OUT + "/mmap.txt")
gb = lambda k: ", ".join("%.2f" % (v / 1e3) for v in m.get(k, {}).get("MB/s", [])) or "missing"
print("%-34s %s | FileHandle.ReadAt %s (GB/s per count, 4 GiB)" % ("MmapHandle, local file -> host", gb("BenchmarkMmapRead/mmap"), gb("BenchmarkMmapRead/file")))
print("%-34s %s | FileHandle.ReadDevice %s" % ("MmapHandle, local file -> GPU", gb("BenchmarkMmapReadDevice/mmap-device"), gb("BenchmarkMmapReadDevice/file-device")))
print("%-34s %s | PCIe ceiling (pinned copy) %s" % ("  registered once", gb("BenchmarkMmapReadDevice/mmap-device-registered"), gb("BenchmarkPinnedCopy")))
PY
