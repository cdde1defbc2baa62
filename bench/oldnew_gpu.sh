#!/bin/bash
# The code before and after a change, side by side on one GPU, in one
# GPU-machine call: ROUNDS times (default 2), old and new taking turns,
# the parts named in PARTS (default "file s3"):
#   file    `kvik bench --safetensors` of a bf16 checkpoint (GB, default 2)
#           on tmpfs (ReadFileToDevice and safetensors.Load onto GPU 0)
#   s3      the same checkpoint and a raw object of random bytes on
#           versitygw (loopback, root on tmpfs): `kvik bench --url
#           s3://…/ckpt.safetensors` (RemoteHandle.ReadDevice and
#           safetensors.Load from S3) and `--url s3://…/raw.bin` (remote
#           reads into host and device memory)
#   gguf    `kvik bench --gguf` of a synthetic GGUF model (GB) on tmpfs
#           (gguf.Load against ReadFileToDevice); needs G/gguf.test
#   save    `kvik bench --safetensors FILE --save` (saves from GPU and
#           host memory through SaveFile)
#   kvikio  bench/kvikio/run.sh's cells (FileHandle device and host reads,
#           device writes) against KvikIO C++ built once in the call from
#           G/kx (prepare.sh's DEST); KV_SIZES (64,1024,4096), KV_THREADS
#           (4,16), KV_WRITE_SIZES (1024). About 90 s per run: with
#           ROUNDS=2 it fills most of a call alone.
# KVIKIO_COMPAT_MODE=on throughout (the POSIX path). Logs under $OUT; a
# summary of old against new (median GB/s of each row, and new/old) last.
#
# Build here into the git-ignored folder G, from the repository root:
#   CGO_ENABLED=0 go build -ldflags=-s -o G/ ./cmd/kvik                 # new
#   git worktree add /tmp/old OLD   # the code before, e.g. main's 1ebedb5
#   (cd /tmp/old && CGO_ENABLED=0 go build -ldflags=-s -o "$OLDPWD/G/old/" ./cmd/kvik)
#   for s3: GOBIN=$PWD/G CGO_ENABLED=0 go install -ldflags='-s -w' \
#             github.com/versity/versitygw/cmd/versitygw@v1.8.0
#   for gguf: CGO_ENABLED=0 go test -c -ldflags=-s -o G/gguf.test ./gguf
#   for kvikio: CGO_ENABLED=0 go build -ldflags=-s -o G/ ./bench/kvikio/compare
#             bench/kvikio/prepare.sh G/kx KVIKIO_GIT THREAD_POOL_GIT NVTX_GIT
# and xz the binaries. There:
#   bash bench/oldnew_gpu.sh G                        # file and s3
#   PARTS="kvikio" bash bench/oldnew_gpu.sh G         # KvikIO cells
#   PARTS="file gguf save" bash bench/oldnew_gpu.sh G # loaders and saves
set -u
G=$(cd "$1" && pwd)
R=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
GB=${GB:-2} ROUNDS=${ROUNDS:-2} PARTS=${PARTS:-file s3}
has() { [[ " $PARTS " == *" $1 "* ]]; }
mkdir -p "$OUT" /dev/shm/s3/bkt /dev/shm/tmp
for f in "$G"/*.xz "$G"/old/*.xz; do [ -f "$f" ] && xz -d "$f"; done
chmod +x "$G/kvik" "$G/old/kvik"
export PYTHONUNBUFFERED=1 KVIKIO_COMPAT_MODE=on TMPDIR=/dev/shm/tmp
L=$OUT/oldnew.txt
step() { echo "=== $(date -u +%T) $*" | tee -a "$L"; }
step "machine: $(nvidia-smi -L | head -1); $(nproc) CPUs; parts: $PARTS"
CK=/dev/shm/ckpt.safetensors
if has file || has s3 || has save; then
  timeout 120 python3 "$R/bench/safetensors_peers.py" $CK --make --gb "$GB" 2>&1 | tail -1 | tee -a "$L"
fi
if has s3; then
  chmod +x "$G/versitygw"
  head -c $((GB << 30)) /dev/urandom > /dev/shm/raw.bin
  PORT=$((20000 + RANDOM % 20000))
  ROOT_ACCESS_KEY=testkey ROOT_SECRET_KEY=testsecret "$G/versitygw" --port "127.0.0.1:$PORT" --keep-alive posix /dev/shm/s3 > "$OUT/versitygw.txt" 2>&1 &
  VPID=$!
  trap 'kill $VPID 2>/dev/null' EXIT
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
  export AWS_ACCESS_KEY_ID=testkey AWS_SECRET_ACCESS_KEY=testsecret AWS_DEFAULT_REGION=us-east-1 AWS_ENDPOINT_URL=http://127.0.0.1:$PORT
  "$G/kvik" cp $CK s3://bkt/ckpt.safetensors 2>&1 | tail -1 | tee -a "$L"
  "$G/kvik" cp /dev/shm/raw.bin s3://bkt/raw.bin 2>&1 | tail -1 | tee -a "$L"
fi
MODEL=/dev/shm/model.gguf
if has gguf; then
  chmod +x "$G/gguf.test"
  (cd "$R/gguf" && KVIK_GGUF_MAKE=$MODEL KVIK_GGUF_GB=$GB timeout 180 "$G/gguf.test" -test.run '^TestMakeSynthetic$' -test.v 2>&1 | tail -1 | tee -a "$L")
fi
if has kvikio; then
  export KVIKIO_SRC=$G/kx/kvikio THREAD_POOL_INC=$G/kx/deps/include NVTX_INC=$G/kx/deps/include BUILD=/tmp/kb
  chmod +x "$G/compare"
  step "build KvikIO"
  bash "$R/bench/kvikio/run.sh" build 2>&1 | tail -1 | tee -a "$L"
fi
# run V PART CMD...: runs a benchmark, keeping its rows prefixed "V PART ".
run() {
  local v=$1 part=$2
  shift 2
  timeout 240 "$@" 2>&1 | tee -a "$OUT/$v-$part.log" | grep -E 'GB/s|^\| (read|write) |[0-9.]+ +[0-9.]+$' | sed "s/^/$v $part /" | tee -a "$L"
}
for r in $(seq 1 "$ROUNDS"); do
  order="old new"; [ $((r % 2)) = 0 ] && order="new old"
  for v in $order; do
    b=$G/kvik; [ $v = old ] && b=$G/old/kvik
    step "round $r $v"
    has file && run $v file "$b" bench --safetensors $CK --repeats 5
    has s3 && run $v s3ckpt "$b" bench --url s3://bkt/ckpt.safetensors --repeats 5
    has s3 && run $v s3raw "$b" bench --url s3://bkt/raw.bin --repeats 5
    has gguf && run $v gguf "$b" bench --gguf $MODEL --repeats 5
    has save && run $v save "$b" bench --safetensors $CK --save --dir /dev/shm/tmp --repeats 3
    if has kvikio; then
      run $v kvikio env KVIK="$b" KVIK_COMMIT=$v COMPARE="$G/compare" OUT="$OUT/kvikio-$v-$r" \
        SIZES="${KV_SIZES:-64,1024,4096}" THREADS="${KV_THREADS:-4,16}" WRITE_SIZES="${KV_WRITE_SIZES:-1024}" \
        REPEATS=5 bash "$R/bench/kvikio/run.sh" run
    fi
  done
done
step done
python3 - "$L" <<'PY' | tee "$OUT/summary.txt"
# Each row's median GB/s per version (the kvik column of a KvikIO cell,
# whose kvik/KvikIO ratio follows), and new/old of their medians.
import re, statistics, sys
rows, order = {}, []
for line in open(sys.argv[1]):
    m = re.match(r"(old|new) (\S+) (.*)$", line.rstrip())
    if not m:
        continue
    v, part, rest = m.groups()
    ratio = None
    if rest.startswith("|"):  # | op | memory | size | workers | kvik | KvikIO | ratio |
        c = [x.strip() for x in rest.strip("|").split("|")]
        if len(c) < 7 or not re.match(r"[\d.]+", c[4]):
            continue
        name, med, ratio = " ".join(c[:4]), float(c[4].split()[0]), float(c[6])
    elif (g := re.match(r"\s*(.+?)\s+[\d.]+ s\s+[\d.]+ GB/s \(([\d.]+)\)", rest)):
        name, med = g.group(1), float(g.group(2))  # best (median)
    elif (g := re.match(r"\s*(.+?)\s{2,}[\d.]+\s+([\d.]+)$", rest)):
        name, med = g.group(1), float(g.group(2))  # table: best, median
    else:
        continue
    key = (part, name)
    if key not in rows:
        rows[key] = {"old": [], "new": [], "oldr": [], "newr": []}
        order.append(key)
    rows[key][v].append(med)
    if ratio is not None:
        rows[key][v + "r"].append(ratio)
print("old and new, median GB/s of each run; new/old of their medians (kvik/KvikIO ratios for KvikIO cells)")
for key in order:
    d = rows[key]
    f = lambda xs: " ".join("%.2f" % x for x in xs) or "-"
    rel = "%.3f" % (statistics.median(d["new"]) / statistics.median(d["old"])) if d["old"] and d["new"] else "-"
    extra = "  kvik/KvikIO old %s new %s" % (f(d["oldr"]), f(d["newr"])) if d["oldr"] or d["newr"] else ""
    print("%-7s %-44s old %-18s new %-18s new/old %s%s" % (key[0], key[1][:44], f(d["old"]), f(d["new"]), rel, extra))
PY
