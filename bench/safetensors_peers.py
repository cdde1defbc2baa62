#!/usr/bin/env python3
"""Time the reference ways of loading a safetensors file onto cuda:0, the peers
of `kvik bench --safetensors FILE`:

  safetensors.torch.load_file(path, device="cuda:0")
  safe_open(path, framework="pt", device="cuda:0"), reading every tensor

  python3 bench/safetensors_peers.py FILE [--repeats N] [--drop-cache] [--device D] [--json]

--drop-cache evicts the file from the page cache (posix_fadvise DONTNEED)
before every repetition. Each time includes torch.cuda.synchronize().
--device cpu times the same two into host memory instead, the peers of
safetensors.LoadHost (bench/loadbench).

  python3 bench/safetensors_peers.py --make FILE --gb 8

writes a transformer-like bf16 checkpoint of about that many GB (hundreds of
tensors: embeddings, attention and MLP weights, norms) to FILE.

  python3 bench/safetensors_peers.py FILE --save DIR [--repeats N] [--json]

loads FILE onto cuda:0 once (load_file) and times saving those CUDA tensors
as a new file in DIR with safetensors.torch.save_file (the peer of `kvik bench
--safetensors FILE --save --dir DIR`), and, where huggingface_hub has it,
save_torch_state_dict sharded at 2 GB. Each file is removed after its
repetition, outside the timing. The GB/s are FILE's size over the time.
"""
import argparse, json, os, sys, time


def drop(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def make(path, gb):
    import torch
    from safetensors.torch import save_file
    hidden, inter, vocab, kv = 2048, 8192, 32000, 512
    g = torch.Generator().manual_seed(1)
    tensors = {"model.embed_tokens.weight": (vocab, hidden), "lm_head.weight": (vocab, hidden),
               "model.norm.weight": (hidden,)}
    per_layer = {"self_attn.q_proj.weight": (hidden, hidden), "self_attn.k_proj.weight": (kv, hidden),
                 "self_attn.v_proj.weight": (kv, hidden), "self_attn.o_proj.weight": (hidden, hidden),
                 "mlp.gate_proj.weight": (inter, hidden), "mlp.up_proj.weight": (inter, hidden),
                 "mlp.down_proj.weight": (hidden, inter), "input_layernorm.weight": (hidden,),
                 "post_attention_layernorm.weight": (hidden,)}
    numel = lambda s: s[0] * (s[1] if len(s) > 1 else 1)
    layer_bytes = sum(numel(s) for s in per_layer.values()) * 2
    fixed = sum(numel(s) for s in tensors.values()) * 2
    layers = max(1, int((gb * 1e9 - fixed) // layer_bytes))
    for i in range(layers):
        for k, s in per_layer.items():
            tensors[f"model.layers.{i}.{k}"] = s
    # Random bits, made fast: one random block reused with a per-tensor shift.
    block = torch.randint(-32768, 32767, (1 << 26,), dtype=torch.int16, generator=g)
    out = {}
    for j, (k, s) in enumerate(tensors.items()):
        n = 1
        for d in s:
            n *= d
        idx = (j * 7919) % block.numel()
        flat = torch.roll(block, -idx)[: min(n, block.numel())]
        reps = (n + flat.numel() - 1) // flat.numel()
        out[k] = flat.repeat(reps)[:n].view(torch.bfloat16).reshape(s).clone()
    save_file(out, path, metadata={"format": "pt"})
    print(f"wrote {path}: {len(out)} tensors, {layers} layers, {os.path.getsize(path)/1e9:.2f} GB")


def bench(path, repeats, dropc, device="cuda:0"):
    import torch, safetensors
    from safetensors.torch import load_file
    gpu = device != "cpu"
    if gpu:
        torch.cuda.init()
        torch.empty(1, device=device)
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    size = os.path.getsize(path)

    def load_file_run():
        t = load_file(path, device=device)
        sync()
        return t

    def safe_open_run():
        out = {}
        with safetensors.safe_open(path, framework="pt", device=device) as f:
            for k in f.keys():
                out[k] = f.get_tensor(k)
        sync()
        return out

    res = []
    for name, fn in ((f"safetensors.torch.load_file {device}", load_file_run), (f"safe_open {device} every tensor", safe_open_run)):
        times = []
        for _ in range(repeats):
            if dropc:
                drop(path)
            t0 = time.perf_counter()
            t = fn()
            times.append(time.perf_counter() - t0)
            del t
            if gpu:
                torch.cuda.empty_cache()
        best = min(times)
        res.append({"name": name, "seconds": times, "best_seconds": best, "gb_per_s": size / best / 1e9})
    return res


def bench_save(path, out, repeats):
    import shutil, torch
    from safetensors.torch import load_file, save_file
    size = os.path.getsize(path)
    tensors = load_file(path, device="cuda:0")
    torch.cuda.synchronize()
    target = os.path.join(out, f"py-save-{os.getpid()}")
    os.makedirs(target, exist_ok=True)

    def save_file_run():
        save_file(tensors, os.path.join(target, "model.safetensors"), metadata={"format": "pt"})

    runs = [("safetensors.torch.save_file cuda:0", save_file_run)]
    try:
        from huggingface_hub import save_torch_state_dict

        def sharded_run():
            # save_torch_state_dict lists its directory first: it must exist.
            os.makedirs(os.path.join(target, "sharded"), exist_ok=True)
            save_torch_state_dict(tensors, os.path.join(target, "sharded"), max_shard_size="2GB")

        runs.append(("hf_hub save_torch_state_dict 2GB", sharded_run))
    except ImportError:
        pass
    res = []
    try:
        for name, fn in runs:
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
                for e in os.listdir(target):
                    p = os.path.join(target, e)
                    shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
            best = min(times)
            res.append({"name": name, "seconds": times, "best_seconds": best, "gb_per_s": size / best / 1e9})
    finally:
        shutil.rmtree(target, ignore_errors=True)
    return res


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--make", action="store_true")
    ap.add_argument("--gb", type=float, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--drop-cache", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--device", default="cuda:0", help="cuda:0 (default) or cpu")
    ap.add_argument("--save", metavar="DIR", help="time saving FILE's tensors from cuda:0 into DIR")
    a = ap.parse_args()
    if a.make:
        make(a.file, a.gb)
        sys.exit(0)
    r = bench_save(a.file, a.save, a.repeats) if a.save else bench(a.file, a.repeats, a.drop_cache, a.device)
    if a.json:
        print(json.dumps(r))
    else:
        for x in r:
            print(f"  {x['name']:<36} {x['best_seconds']:8.3f} s  {x['gb_per_s']:7.2f} GB/s")
