#!/usr/bin/env python3
"""Check a sharded checkpoint that kvik's safetensors.SaveSharded wrote with
the reference readers:

  python3 safetensors/testdata/xcheck_sharded.py DIR

DIR holds the checkpoint and expected.json, both written by the Go test
TestWriteShardedForPython (KVIK_SHARDED_XCHECK_OUT=DIR): for every tensor
its dtype, shape and the sha256 of its bytes, the header metadata, and the
index's name. The check reads the index as transformers does (json:
"metadata"."total_size", "weight_map"), opens every shard with
safetensors.safe_open (framework "pt"), compares each tensor's dtype,
shape, bytes and the shard's metadata, then loads the whole state dict
shard by shard with safetensors.torch.load_file, as
transformers.modeling_utils.load_sharded_checkpoint does. Exits 1 on the
first mismatch.
"""
import hashlib, json, os, sys


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def torch_bytes(t):
    import torch
    t = t.detach().cpu().contiguous().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def main(d):
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file

    dtypes = {"BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16,
              "F16": torch.float16, "BF16": torch.bfloat16, "I32": torch.int32, "F32": torch.float32,
              "F64": torch.float64, "I64": torch.int64}
    with open(os.path.join(d, "expected.json")) as f:
        exp = json.load(f)
    with open(os.path.join(d, exp["index"])) as f:
        ix = json.load(f)
    wm, meta = ix["weight_map"], ix["metadata"]
    want = exp["tensors"]
    if set(wm) != set(want):
        fail(f"weight_map names {len(wm)} tensors, expected {len(want)}: {sorted(set(wm) ^ set(want))[:5]}")
    total = sum(t["nbytes"] for t in want.values())
    if meta.get("total_size") != total:
        fail(f"total_size {meta.get('total_size')}, expected {total}")
    shards = sorted(set(wm.values()))
    if len(shards) != exp["shards"]:
        fail(f"{len(shards)} shards, expected {exp['shards']}")
    for s in shards:
        if os.path.basename(s) != s or not os.path.isfile(os.path.join(d, s)):
            fail(f"shard {s!r} missing or outside the directory")

    def check(name, t):
        w = want[name]
        if t.dtype != dtypes[w["dtype"]] or list(t.shape) != w["shape"]:
            fail(f"{name}: {t.dtype} {list(t.shape)}, expected {w['dtype']} {w['shape']}")
        if hashlib.sha256(torch_bytes(t)).hexdigest() != w["sha256"]:
            fail(f"{name}: bytes differ")

    n = 0
    for s in shards:
        with safe_open(os.path.join(d, s), framework="pt") as f:
            keys = set(f.keys())
            mapped = {k for k, v in wm.items() if v == s}
            if keys != mapped:
                fail(f"{s}: holds {len(keys)} tensors, the index maps {len(mapped)} to it")
            if (f.metadata() or {}) != exp["metadata"]:
                fail(f"{s}: metadata {f.metadata()}, expected {exp['metadata']}")
            for k in keys:
                check(k, f.get_tensor(k))
                n += 1
    state = {}
    for s in shards:  # transformers' load_sharded_checkpoint, without a model
        state.update(load_file(os.path.join(d, s)))
    if set(state) != set(want):
        fail("load_file over the shards gives other tensors")
    for k, t in state.items():
        check(k, t)
    print(f"OK: {len(shards)} shards, {n} tensors, {total} bytes; safe_open and load_file agree with kvik")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    main(sys.argv[1])
