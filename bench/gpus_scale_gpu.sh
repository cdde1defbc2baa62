#!/bin/bash
# Every GPU of the node (issue 41), in one GPU-machine call of at most 7
# minutes (about 4 on two GPUs): what one process moves onto 1, 2, ... N
# GPUs against N processes, for kvik and for the C probe of the staged
# path, and how many times the bytes cross host memory.
#   - the machine: nvidia-smi topo -m, each GPU's NUMA node (sysfs, and
#     kvik info's), the CPUs and nodes;
#   - an 8 GB bf16 safetensors checkpoint and an 8 GB GGUF model on
#     /dev/shm (bench/safetensors_peers.py --make; gguf's
#     TestMakeSynthetic);
#   - kvik bench --safetensors and --gguf on every visible GPU: the curve
#     over 1..N GPUs, the replicated load, and N kvik processes each
#     loading its balanced share in step (the process-per-GPU reference),
#     with --plot pictures; the DEBUG records of NUMA placement;
#   - bench/probes/pread_steady.c (built here with gcc) in one process on
#     1..N GPUs, pread into pinned buffers then copied (three crossings of
#     host memory) and copies from a registered mapping of the file (one
#     crossing), 16 and 32 threads; then as N processes, one GPU and one
#     part of the file each, in step, both ways;
#   - optionally the GPU tests of the new code (G/cmdkvik.test,
#     G/staging.test, G/numa.test);
#   - a summary table last (also $OUT/summary.txt).
#
# Build here into the git-ignored folder .gpu/scale (CGO_ENABLED=0,
# stripped; 26 MB, 50 MB with the optional test binaries: under the
# carry limit of 64 MiB):
#   mkdir -p .gpu/scale
#   CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o .gpu/scale/kvik ./cmd/kvik
#   CGO_ENABLED=0 go test -c -trimpath -ldflags='-s -w' -o .gpu/scale/gguf.test ./gguf
#   CGO_ENABLED=0 go test -c -trimpath -ldflags='-s -w' -o .gpu/scale/cmdkvik.test ./cmd/kvik        # optional
#   CGO_ENABLED=0 go test -c -trimpath -ldflags='-s -w' -o .gpu/scale/staging.test ./internal/staging # optional
#   CGO_ENABLED=0 go test -c -trimpath -ldflags='-s -w' -o .gpu/scale/numa.test ./internal/numa       # optional
# There (carry .gpu/scale):
#   bash bench/gpus_scale_gpu.sh .gpu/scale
# Knobs: GB (checkpoint, default 8), GGUF_GB (default 8; 0 skips GGUF),
# REPEATS (default 5), GPUS (kvik bench --gpus, default all).
set -u
G=$(cd "$1" && pwd)
R=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
GB=${GB:-8} GGUF_GB=${GGUF_GB:-8} REPEATS=${REPEATS:-5} GPUS=${GPUS:-all}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KVIKIO_COMPAT_MODE=on
L=$OUT/scale.txt
: > "$L"
T0=$(date +%s)
step() { echo "=== $(date -u +%T) (+$(( $(date +%s) - T0 )) s) $*" | tee -a "$L"; }
CK=${CK:-/dev/shm/ckpt.safetensors} GG=${GG:-/dev/shm/model.gguf}
trap 'rm -f $CK $GG' EXIT

step machine
N=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
(nvidia-smi -L; nvidia-smi topo -m; echo "CPUs: $(nproc)"; lscpu | grep -i 'numa\|socket\|model name') 2>&1 | tee -a "$L"
echo "each GPU's NUMA node (sysfs numa_node of its PCI address):" | tee -a "$L"
nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader 2>/dev/null | while IFS=', ' read -r i bus; do
  id=$(echo "$bus" | tr 'A-F' 'a-f' | sed -E 's/^0*([0-9a-f]{4}:)/\1/')
  echo "  GPU $i $bus -> $(cat /sys/bus/pci/devices/$id/numa_node 2>/dev/null || echo '?')"
done | tee -a "$L"
"$G/kvik" info 2>&1 | grep -E '^  GPU |KVIK_NUMA' | tee -a "$L"
if [ "$N" -lt 1 ]; then step "no GPU: nothing to measure"; exit 1; fi

step "make a ${GB} GB checkpoint and a ${GGUF_GB} GB GGUF model on /dev/shm"
timeout 200 python3 "$R/bench/safetensors_peers.py" "$CK" --make --gb "$GB" 2>&1 | tail -1 | tee -a "$L"
if [ "$GGUF_GB" != 0 ]; then
  (cd "$R/gguf" && KVIK_GGUF_MAKE=$GG KVIK_GGUF_GB=$GGUF_GB timeout 150 "$G/gguf.test" -test.run '^TestMakeSynthetic$' 2>&1 | tail -1 | tee -a "$L")
fi
[ -s "$CK" ] || { step "no checkpoint: stop"; exit 1; }

for f in safetensors gguf; do
  file=$CK; [ $f = gguf ] && file=$GG
  [ -s "$file" ] || continue
  step "kvik bench --$f: the curve over 1..$N GPUs, replicated, $N processes in step"
  timeout 150 "$G/kvik" bench --$f "$file" --gpus "$GPUS" --repeats "$REPEATS" --warmup 1 --plot "$OUT/curve-$f.svg" 2>&1 | tee "$OUT/bench-$f.txt" | tee -a "$L"
done
[ -s "$GG" ] && rm -f "$GG"

step "NUMA placement records (DEBUG), one load over every GPU"
KVIKIO_LOG_LEVEL=DEBUG timeout 60 "$G/kvik" bench --safetensors "$CK" --repeats 1 --no-baselines 2>&1 | grep 'NUMA placement' | tee "$OUT/numa.txt" | tee -a "$L"
[ -s "$OUT/numa.txt" ] || echo "(no record: nothing to place, as on a host of one NUMA node, or the load failed)" | tee -a "$L"

step "probe: bench/probes/pread_steady.c, one process, 1..$N GPUs, pread (3 crossings) and a registered mapping (1 crossing)"
gpus=$(seq -s, 1 "$N")
rm -f /tmp/pread_steady
gcc -O2 -pthread "$R/bench/probes/pread_steady.c" -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcuda -o /tmp/pread_steady 2>&1 | tee -a "$L"
if [ -x /tmp/pread_steady ]; then
  PS_TASK_KIB=2048 PS_THREADS=16,32 PS_GPUS=$gpus PS_FDS=own PS_MODES=pread,mmap timeout 150 /tmp/pread_steady "$CK" 2>&1 | tee "$OUT/probe-one.txt" | tee -a "$L"
  for mode in pread mmap; do
    step "probe: $N processes at once, one GPU and one part of the file each, $mode, in step"
    at=$(python3 -c 'import time; print(f"{time.time() + 4:.3f}")')
    for k in $(seq 0 $((N - 1))); do
      CUDA_VISIBLE_DEVICES=$k PS_TASK_KIB=2048 PS_THREADS=16 PS_GPUS=1 PS_FDS=own PS_MODES=$mode PS_PART=$k/$N \
        PS_START_AT=$at PS_SLOT_MS=1000 timeout 60 /tmp/pread_steady "$CK" > "$OUT/probe-$mode-$k.txt" 2>&1 &
    done
    wait
    cat "$OUT"/probe-$mode-*.txt | sed 's/^/  /' | tee -a "$L"
  done
else
  step "probe: gcc failed; skipped"
fi

for t in cmdkvik:cmd/kvik:'TestBenchModelGPUs|TestBenchGPUsCLI|TestBenchModelURL' staging:internal/staging:'TestPlacer|TestPoolNodes|TestWorkers|TestBouncePool' numa:internal/numa:'.'; do
  IFS=: read -r bin dir run <<< "$t"
  [ -x "$G/$bin.test" ] || continue
  step "GPU tests: $dir ($run)"
  (cd "$R/$dir" && KVIK_TEST_BIN="$G/kvik" timeout 120 "$G/$bin.test" -test.run "$run" -test.v 2>&1 | grep -E '^(--- |ok|FAIL|PASS)' | tee -a "$L")
done

step "summary (also $OUT/summary.txt)"
python3 - "$OUT" "$N" <<'PY' 2>&1 | tee "$OUT/summary.txt" | tee -a "$L"
import glob, os, re, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
num = r"([0-9.]+)"
rows = []
def row(what, *cells):
    rows.append((what,) + cells)
kvik_best = {}  # (format, GPUs) -> best GB/s of one process
for f in ("safetensors", "gguf"):
    p = os.path.join(out, f"bench-{f}.txt")
    if not os.path.exists(p):
        continue
    t = open(p).read()
    for m in re.finditer(rf"^\s+(\d+)\s+{num} \(\s*{num}\)\s+{num}x \(\s*{num}x\)\s*$", t, re.M):
        k, b, md, xb, xm = m.groups()
        row(f"kvik {f}.Load, one process, GPUs={k}", f"{float(b):.2f}", f"{float(md):.2f}", f"{float(xb):.2f}x / {float(xm):.2f}x one GPU")
        kvik_best[(f, int(k))] = float(b)
    m = re.search(rf"(\d+) processes, each its share on its GPU, in step: {num} \({num}\) GB/s, {num}x \({num}x\) one GPU; one process / \d+ processes: {num}x \({num}x\)", t)
    if m:
        k, b, md, xb, xm, rb, rm = m.groups()
        row(f"kvik {f}.Load, {k} processes in step", f"{float(b):.2f}", f"{float(md):.2f}", f"one process / {k} processes {float(rb):.2f}x / {float(rm):.2f}x")
    m = re.search(rf"replicated on (\d+) GPUs, time / one GPU's: {num}x \({num}x\)", t)
    if m:
        row(f"kvik {f}.Load replicated on {m.group(1)}", "", "", f"time / one GPU's {float(m.group(2)):.2f}x / {float(m.group(3)):.2f}x")
    if "Error" in t or "kvik: " in t:
        for line in t.splitlines():
            if line.startswith("kvik: "):
                row(f"kvik {f}: error", "", "", line[6:80])
probe = {}
p = os.path.join(out, "probe-one.txt")
if os.path.exists(p):
    for m in re.finditer(rf"T=\s*(\d+) GPUs=(\d+) fds=\S+\s+mode=(\w+)\s+best\s+{num} GB/s, mean\s+{num}", open(p).read()):
        th, g, mode, b, mean = m.groups()
        k = (mode, int(g))
        if float(b) > probe.get(k, (0, 0, 0))[0]:
            probe[k] = (float(b), float(mean), int(th))
    for (mode, g), (b, mean, th) in sorted(probe.items(), key=lambda kv: (kv[0][1], kv[0][0] != "pread")):
        note = f"T={th}"
        if mode == "mmap" and ("pread", g) in probe:
            note += f"; mmap / pread {b / probe[('pread', g)][0]:.2f}x"
        if mode == "pread" and ("safetensors", g) in kvik_best:
            note += f"; kvik safetensors / probe {kvik_best[('safetensors', g)] / b:.2f}x"
        row(f"probe one process, GPUs={g}, {mode}", f"{b:.2f}", f"{mean:.2f} (mean)", note)
    for m in re.finditer(rf"GPUs=(\d+) mmap\+populate {num} ms, cuMemHostRegister {num} ms", open(p).read()):
        row(f"probe registration of the file, GPUs={m.group(1)}", "", "", f"mmap+populate {m.group(2)} ms, register {m.group(3)} ms")
for mode in ("pread", "mmap"):
    reps = []
    for p in sorted(glob.glob(os.path.join(out, f"probe-{mode}-*.txt"))):
        m = re.search(r"; each: ([0-9. ]+)$", open(p).read(), re.M)
        if m:
            reps.append([float(x) for x in m.group(1).split()])
    if len(reps) == n and n > 0:
        sums = [sum(r[i] for r in reps) for i in range(min(map(len, reps)))]
        note = ""
        if (mode, n) in probe:
            note = f"one process / {n} processes {probe[(mode, n)][0] / max(sums):.2f}x"
        row(f"probe {n} processes in step, {mode}", f"{max(sums):.2f}", f"{statistics.median(sums):.2f}", note)
if not rows:
    print("nothing measured")
    sys.exit()
w = max(len(r[0]) for r in rows)
print(f"{'what':<{w}}  {'best GB/s':>9}  {'median':>14}  notes")
for r in rows:
    print(f"{r[0]:<{w}}  {r[1]:>9}  {r[2]:>14}  {r[3]}")
PY
step done
