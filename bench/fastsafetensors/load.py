#!/usr/bin/env python3
"""Time fastsafetensors loading one safetensors file onto GPU memory, the
peer of `kvik bench --safetensors FILE`, and print the figures in that
command's format.

  python3 load.py FILE [--paths nogds,gds] [--configs defaults,tuned]
                       [--repeats N] [--threads T] [--gpus G] [--json OUT]

Paths: nogds is fastsafetensors' bounce-buffer path (pread into pinned host
buffers, then cudaMemcpy), gds its cuFile path. Configurations: defaults is
SafeTensorsFileLoader(pg, device, nogds=...) and copy_files_to_device() with
their default arguments, as vLLM calls them (one copy thread per file:
max_copy_block_size is 16 GiB); tuned is what its own perf tool does
for a checkpoint of fewer files than threads: T threads and blocks of
size/T rounded up to the bounce buffer (16 MiB).

One timed load: add_filenames, copy_files_to_device (which allocates the
device memory), get_tensor of every tensor, torch.cuda.synchronize. The
loader itself is made once per configuration and reused (loader.reset()
between loads, as its examples do), so its pinned buffers and threads are
not counted; each configuration loads once untimed (and is checked against
safetensors' own reader) before the timed loads, which take turns with the
other configurations. torch.cuda.empty_cache() after every load returns the
memory, so that every load allocates anew.

--gpus 2 runs one process per GPU (CUDA_VISIBLE_DEVICES=0 and 1, each
loading the whole file onto its GPU), the way fastsafetensors spreads over
GPUs; the processes start every load together (a file barrier) and a load's
time is from the first start to the last end; GB/s counts the bytes that
reached the GPUs (2 x file size).

  python3 load.py --summary JSON...

merges the JSON files of this script (--json) and of `kvik bench
--safetensors --json` (named kvik_LABEL_*.json) by label and row over the
rounds and prints the side-by-side tables and the ratios.
"""
import argparse, glob, json, os, statistics, subprocess, sys, tempfile, time, warnings

MiB = 1 << 20


def configs_for(a, size):
    out = []
    bbuf_kb = 16 * 1024
    for path in a.paths.split(","):
        for c in a.configs.split(","):
            if c == "defaults":
                out.append({"name": f"fst {path} defaults", "path": path, "threads": None, "block": None, "bbuf_kb": None})
            elif c == "tuned":
                t = a.threads
                step = bbuf_kb * 1024
                block = -(-size // t)
                block = -(-block // step) * step
                out.append({"name": f"fst {path} {t}x{block // MiB}MiB", "path": path, "threads": t, "block": block, "bbuf_kb": bbuf_kb})
            else:
                sys.exit(f"unknown configuration {c!r} (defaults, tuned)")
    return out


class Barrier:
    """A barrier over processes through files in a shared directory: step k
    waits until every rank has touched k.RANK."""

    def __init__(self, d, rank, world, timeout=180):
        self.d, self.rank, self.world, self.timeout = d, rank, world, timeout

    def wait(self, k):
        if self.world == 1:
            return
        open(os.path.join(self.d, f"{k}.{self.rank}"), "w").close()
        deadline = time.time() + self.timeout
        while len(glob.glob(os.path.join(self.d, f"{k}.*"))) < self.world:
            if os.path.exists(os.path.join(self.d, "abort")):
                raise RuntimeError(f"rank {self.rank}: another rank failed")
            if time.time() > deadline:
                raise TimeoutError(f"rank {self.rank}: barrier {k} timed out")
            time.sleep(0.0005)


def verify(fb_tensors, path, torch):
    """Compare a few loaded tensors (first, middle, last, the largest) with
    safetensors' own reader."""
    try:
        from safetensors import safe_open
    except ImportError:
        return "not checked (no safetensors)"
    keys = sorted(fb_tensors)
    pick = {keys[0], keys[len(keys) // 2], keys[-1], max(keys, key=lambda k: fb_tensors[k].numel())}
    with safe_open(path, framework="pt", device="cpu") as f:
        for k in sorted(pick):
            ref = f.get_tensor(k)
            got = fb_tensors[k].cpu()
            if got.dtype != ref.dtype or tuple(got.shape) != tuple(ref.shape) or not torch.equal(got.view(-1).view(torch.uint8), ref.view(-1).view(torch.uint8)):
                raise RuntimeError(f"tensor {k} differs from safetensors' reader")
    return f"checked {len(pick)} tensors against safetensors.safe_open"


def worker(a, rank, world, sync):
    import torch
    import fastsafetensors
    from fastsafetensors import SafeTensorsFileLoader, SingleGroup
    from fastsafetensors import cpp as fstcpp

    torch.cuda.init()
    torch.empty(1, device="cuda:0")
    size = os.path.getsize(a.file)
    cfgs = configs_for(a, size)
    bar = Barrier(sync, rank, world)
    info = {"version": fastsafetensors.__version__, "module": fastsafetensors.__file__,
            "torch": torch.__version__, "torch_cuda": torch.version.cuda,
            "gpu": torch.cuda.get_device_name(0)}
    loaders = {}
    for c in cfgs:
        c["seconds"], c["t0"], c["t1"], c["error"], c["note"] = [], [], [], None, ""
        kw = {"nogds": c["path"] == "nogds"}
        if c["threads"]:
            kw.update(max_threads=c["threads"], bbuf_size_kb=c["bbuf_kb"])
        try:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                t0 = time.perf_counter()
                loaders[c["name"]] = SafeTensorsFileLoader(SingleGroup(), "cuda:0", **kw)
                c["construct_seconds"] = time.perf_counter() - t0
            msgs = [str(x.message) for x in w]
            if c["path"] == "gds" and any("nogds" in m for m in msgs):
                # It falls back to the bounce path with only a warning.
                c["error"] = "GDS unavailable, fastsafetensors fell back to nogds: " + "; ".join(msgs)
        except Exception as e:
            c["error"] = f"loader: {type(e).__name__}: {e}"
    info["cufile_found"] = bool(fstcpp.is_cufile_found())
    info["cufile_version"] = fstcpp.cufile_version()

    def load(c):
        loader = loaders[c["name"]]
        loader.add_filenames({0: [a.file]})
        if c["block"]:
            fb = loader.copy_files_to_device(max_copy_block_size=c["block"])
        else:
            fb = loader.copy_files_to_device()
        ts = {k: fb.get_tensor(k) for k in loader.get_keys()}
        torch.cuda.synchronize()
        return fb, ts

    def release(loader, fb, ts):
        ts.clear()
        fb.close()
        loader.reset()
        torch.cuda.empty_cache()

    step = 0
    for c in cfgs:  # one untimed load each, checked
        bar.wait(step)
        step += 1
        if c["error"]:
            continue
        try:
            fb, ts = load(c)
            c["note"] = verify(ts, a.file, torch)
            release(loaders[c["name"]], fb, ts)
        except Exception as e:
            c["error"] = f"{type(e).__name__}: {e}"
    for rep in range(a.repeats):
        for k in range(len(cfgs)):
            c = cfgs[(k + rep) % len(cfgs)]
            bar.wait(step)
            step += 1
            if c["error"]:
                continue
            try:
                t0w, t0 = time.time(), time.perf_counter()
                fb, ts = load(c)
                t1 = time.perf_counter()
                c["seconds"].append(t1 - t0)
                c["t0"].append(t0w)
                c["t1"].append(t0w + (t1 - t0))
                release(loaders[c["name"]], fb, ts)
            except Exception as e:
                c["error"] = f"{type(e).__name__}: {e}"
    for lo in loaders.values():
        try:
            lo.close()
        except Exception:
            pass
    return {"rank": rank, "size": size, "info": info, "configs": cfgs}


def row(name, secs, nbytes, base, base_name, width=34):
    best, med = min(secs), statistics.median(secs)
    s = f"  {name:<{width}} {best:8.3f} s  {nbytes / best / 1e9:7.2f} GB/s ({nbytes / med / 1e9:.2f})"
    if base:
        s += f"  {base[0] / best:.2f}x ({base[1] / med:.2f}x) {base_name}"
    return s


def results_of(per_rank, world, size):
    """One result per configuration; with several ranks a repetition's time
    runs from the first start to the last end."""
    out = []
    for i, c in enumerate(per_rank[0]["configs"]):
        cs = [r["configs"][i] for r in per_rank]
        err = "; ".join(f"rank {r['rank']}: {x['error']}" for r, x in zip(per_rank, cs) if x["error"])
        n = min(len(x["t0"]) for x in cs)
        if world == 1:
            secs = c["seconds"][:n]
        else:
            secs = [max(x["t1"][j] for x in cs) - min(x["t0"][j] for x in cs) for j in range(n)]
        name = c["name"] + " gpu" + "+".join(map(str, range(world))) + ("" if world == 1 else f" {world} procs")
        res = {"name": name, "seconds": secs, "delivered_bytes": size * world, "error": err or None,
               "note": c["note"], "construct_seconds": c.get("construct_seconds")}
        if secs:
            res.update(best_seconds=min(secs), median_seconds=statistics.median(secs),
                       gb_per_s=size * world / min(secs) / 1e9, median_gb_per_s=size * world / statistics.median(secs) / 1e9)
        if world > 1:
            res["per_process_gb_per_s"] = [size / min(x["seconds"]) / 1e9 if x["seconds"] else None for x in cs]
        out.append(res)
    return out


def run(a):
    size = os.path.getsize(a.file)
    if a.gpus == 1:
        per_rank = [worker(a, 0, 1, None)]
    else:
        sync = tempfile.mkdtemp(prefix="fst-sync-")
        procs = []
        for r in range(a.gpus):
            env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(r))
            cmd = [sys.executable, os.path.abspath(__file__), a.file, "--paths", a.paths, "--configs", a.configs,
                   "--repeats", str(a.repeats), "--threads", str(a.threads), "--rank", str(r), "--world", str(a.gpus), "--sync", sync]
            out = open(os.path.join(sync, f"out.{r}"), "w")  # files, not pipes: no rank blocks on a full pipe
            procs.append((subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT), out))
        # A rank that fails makes the others stop at their next barrier
        # instead of waiting there for it.
        deadline = time.time() + a.timeout
        while True:
            rcs = [p.poll() for p, _ in procs]  # every one, to see each exit
            if all(rc is not None for rc in rcs):
                break
            if any(rcs):
                open(os.path.join(sync, "abort"), "w").close()
            if time.time() > deadline:
                print(f"  ranks killed after {a.timeout:.0f}s")
                for p, _ in procs:
                    p.kill()
                break
            time.sleep(0.2)
        per_rank = []
        for r, (p, out) in enumerate(procs):
            p.wait()
            out.close()
            res = None
            for line in open(os.path.join(sync, f"out.{r}")):
                if line.startswith("FSTRESULT "):
                    res = json.loads(line[len("FSTRESULT "):])
                else:
                    print(f"  [rank {r}] {line.rstrip()}")
            per_rank.append(res)
        missing = [f"rank {r} (exit status {p.returncode})" for r, ((p, _), res) in enumerate(zip(procs, per_rank)) if res is None]
        if missing:
            sys.exit("no result from " + ", ".join(missing))
    info = per_rank[0]["info"]
    results = results_of(per_rank, a.gpus, size)
    doc = {"tool": "fastsafetensors", "file": a.file, "size": size, "label": a.label, "gpus": a.gpus,
           "repeats": a.repeats, "info": info, "results": results}
    print(f"fastsafetensors {info['version']} ({info['gpu']}, torch {info['torch']} CUDA {info['torch_cuda']}, "
          f"cuFile {'found' if info['cufile_found'] else 'not found'} {info['cufile_version']})")
    show(doc)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f)


def show(doc):
    size, rs = doc["size"], doc["results"]
    print(f"fastsafetensors {doc['file']}: {size / 1e9:.2f} GB, warm, {doc['repeats']} repetitions taking turns; "
          f"best (median); GB/s = bytes on the GPUs / time")
    base = None
    for r in rs:
        if r["error"]:
            print(f"  {r['name']:<34} failed: {r['error']}")
            continue
        if base is None:
            base = (r["best_seconds"], r["median_seconds"], r["name"])
        print(row(r["name"], r["seconds"], r["delivered_bytes"], base[:2], base[2]))
        if r.get("per_process_gb_per_s"):
            print("    per process (best): " + ", ".join("-" if x is None else f"{x:.2f}" for x in r["per_process_gb_per_s"]) + " GB/s")
    for r in rs:
        if r.get("note") and not r["error"]:
            print(f"  {r['name']}: {r['note']}")
            break


# Bytes on the GPUs per load of kvik's rows (kvik prints file bytes / time).
def kvik_delivered(name, size):
    return 2 * size if "replicated" in name else size


def summary(files, title="summary: kvik and fastsafetensors, every round merged; best (median)"):
    rows = {}  # label -> row name -> {"seconds": [...], "who": "kvik" or "fst", ...}
    sizes, errors = {}, []
    for fn in files:
        base = os.path.basename(fn)
        try:
            doc = json.load(open(fn))
        except Exception as e:
            errors.append(f"{base}: unreadable ({e})")
            continue
        if isinstance(doc, list):  # kvik bench --json, saved as kvik_LABEL_*.json
            label = base.split("_")[1] if base.count("_") >= 2 else "?"
            for r in doc:
                if r.get("best_seconds") and r.get("gb_per_s"):
                    sizes.setdefault(label, r["gb_per_s"] * 1e9 * r["best_seconds"])
                e = rows.setdefault(label, {}).setdefault("kvik " + r["name"], {"seconds": [], "who": "kvik"})
                e["seconds"] += r["seconds"]
        else:
            label = doc["label"]
            sizes[label] = doc["size"]
            for r in doc["results"]:
                e = rows.setdefault(label, {}).setdefault(r["name"], {"seconds": [], "who": "fst", "bytes": r["delivered_bytes"]})
                e["seconds"] += r["seconds"]
                if r["error"]:
                    e["error"] = r["error"]
    print(f"==== {title} ====")
    for m in errors:
        print("  " + m)
    # (label, GPUs) -> [(who, name, GB/s best, GB/s median)]
    cand = {}
    for label, rs in rows.items():
        size = sizes.get(label, 0)
        print(f"[{label}] {size / 1e9:.2f} GB; GB/s = bytes on the GPUs / time (kvik's replicated row: 2 x file)")
        order = sorted(rs, key=lambda n: (rs[n]["who"] != "kvik", "gpu0+1" in n, list(rs).index(n)))
        for name in order:
            e = rs[name]
            if e["who"] == "kvik":
                e["bytes"] = kvik_delivered(name, size)
            if not e["seconds"]:
                print(f"  {name:<40} no result{': ' + e['error'] if e.get('error') else ''}")
                continue
            print(row(name, e["seconds"], e["bytes"], None, "", 40))
            if e["who"] == "kvik" and "safetensors.Load" not in name:
                continue
            gpus = 2 if ("gpu0+1" in name or "procs" in name) else 1
            v = (e["who"], name, e["bytes"] / min(e["seconds"]) / 1e9, e["bytes"] / statistics.median(e["seconds"]) / 1e9)
            cand.setdefault((label, gpus), []).append(v)
            cand.setdefault(("all file systems", gpus), []).append((v[0], f"{name} [{label}]", v[2], v[3]))
    if any(v[0] == "fst" for vs in cand.values() for v in vs):
        print("ratios: kvik's safetensors.Load / fastsafetensors' best row, best (median); goal >= 2x")
    for (where, gpus), vs in sorted(cand.items(), key=lambda kv: (kv[0][1], kv[0][0] == "all file systems", kv[0][0])):
        fst = [v for v in vs if v[0] == "fst"]
        kv = [v for v in vs if v[0] == "kvik"]
        if not fst:
            continue
        f = max(fst, key=lambda v: v[2])
        if where == "all file systems":  # kvik's best of each row over the file systems
            best = {}
            for v in kv:
                n = v[1].rsplit(" [", 1)[0]
                if n not in best or v[2] > best[n][2]:
                    best[n] = v
            kv = list(best.values())
        print(f"  {gpus} GPU{'s' if gpus > 1 else ''}, {where}: fastsafetensors' best {f[1]} {f[2]:.2f} ({f[3]:.2f}) GB/s")
        if not kv:
            print("    no kvik row")
        for k in kv:
            print(f"    {k[1]:<52} {k[2]:7.2f} ({k[3]:.2f}) GB/s  {k[2] / f[2]:.2f}x ({k[3] / f[3]:.2f}x)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?")
    ap.add_argument("--paths", default="nogds", help="comma list: nogds, gds")
    ap.add_argument("--configs", default="defaults,tuned", help="comma list: defaults, tuned")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=16, help="copy threads of the tuned configuration")
    ap.add_argument("--gpus", type=int, default=1, help="processes, one per GPU")
    ap.add_argument("--label", default="", help="label of this run in the summary (e.g. tmpfs, ext4)")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    ap.add_argument("--timeout", type=float, default=300, help="seconds for the child processes (--gpus > 1)")
    ap.add_argument("--summary", nargs="+", metavar="JSON", help="merge and compare result files")
    ap.add_argument("--table", nargs="+", metavar="JSON", help="print result files as tables (no title)")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--world", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--sync", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.summary:
        summary(a.summary)
    elif a.table:
        summary(a.table, "kvik bench --safetensors --json, shown with bytes on the GPUs")
    elif a.rank is not None:  # a child of --gpus N
        res = worker(a, a.rank, a.world, a.sync)
        print("FSTRESULT " + json.dumps(res), flush=True)
    elif a.file:
        run(a)
    else:
        ap.error("a FILE or --summary is needed")
