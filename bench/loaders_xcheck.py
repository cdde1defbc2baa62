#!/usr/bin/env python3
"""Cross-check kvik's safetensors and npy packages against the reference libraries.

  make-st DIR [--small]   write .safetensors files with safetensors.torch.save_file
  make-npy DIR [--small]  write .npy files with numpy.save
  samples-expected DIR    expected.json for the reference project's sample files
  check DIR               load files kvik wrote (DIR/expected.json) with
                          safetensors.torch.load_file / numpy.load and compare

Each make-* command writes DIR/expected.json: for every file and tensor the
dtype, shape and sha256 of the bytes as the reference library loads them, so
Go tests compare against the reference library, not hand-written values.
"""
import hashlib, json, os, sys
import numpy as np


def sha(b):
    return hashlib.sha256(b).hexdigest()


def rng_bytes(rng, n):
    return rng.integers(0, 256, size=n, dtype=np.uint8)


def torch_bytes(t):
    import torch
    t = t.detach().cpu().contiguous().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


ST_DTYPES = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16",
             "I32", "U32", "F32", "F64", "I64", "U64"]


OPTIONAL_DTYPES = {"F8_E8M0": "float8_e8m0fnu", "C64": "complex64"}


def supported_optional():
    """The optional dtypes this torch and safetensors can save and load."""
    import torch, safetensors.torch as st
    out = []
    for name, attr in OPTIONAL_DTYPES.items():
        try:
            d = getattr(torch, attr)
            t = torch.zeros(16, dtype=torch.uint8).view(d)  # what random_tensor and torch_bytes do
            t.reshape(-1).view(torch.uint8)
            st.load(st.save({"x": t}))
            out.append(name)
        except Exception:
            pass
    return out


def torch_dtype(name):
    import torch
    if name in OPTIONAL_DTYPES:
        return getattr(torch, OPTIONAL_DTYPES[name])
    return {"BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "F8_E5M2": torch.float8_e5m2,
            "F8_E4M3": torch.float8_e4m3fn, "I16": torch.int16, "U16": torch.uint16, "F16": torch.float16,
            "BF16": torch.bfloat16, "I32": torch.int32, "U32": torch.uint32, "F32": torch.float32,
            "F64": torch.float64, "I64": torch.int64, "U64": torch.uint64}[name]


def random_tensor(rng, dt, shape):
    import torch
    n = int(np.prod(shape)) if shape else 1
    size = torch.empty(0, dtype=torch_dtype(dt)).element_size()
    raw = rng_bytes(rng, n * size)
    if dt == "BOOL":
        raw = (raw & 1).astype(np.uint8)
    # Copy into a fresh 1-D buffer: a 0-d or empty array may have stride 0.
    t = torch.tensor(raw.reshape(-1).tolist(), dtype=torch.uint8).view(torch_dtype(dt))
    return t.reshape(shape).clone()


def make_st(out, small):
    import torch, safetensors, safetensors.torch as st
    rng = np.random.default_rng(11)
    os.makedirs(out, exist_ok=True)
    shapes = [(), (0,), (3,), (2, 3), (4, 0, 2), (5, 7, 3)] if small else \
             [(), (0,), (1,), (17,), (3, 5), (2, 0, 4), (7, 9, 11), (64, 33), (2, 3, 4, 5)]
    files = {}
    # One file with every dtype and shape, one with metadata, a sharded pair.
    tensors = {}
    for i, dt in enumerate(ST_DTYPES + supported_optional()):
        for j, shape in enumerate(shapes if not small else shapes[i % 3:i % 3 + 3]):
            tensors[f"layer{i}.{dt.lower()}.{j}"] = random_tensor(rng, dt, shape)
    files["all_dtypes.safetensors"] = (tensors, None)
    files["metadata.safetensors"] = ({"w": random_tensor(rng, "F32", (4, 4)), "b": random_tensor(rng, "BF16", (4,))},
                                     {"format": "pt", "note": "kvik fixture"})
    expected = {"generator": f"safetensors {safetensors.__version__}, torch {torch.__version__}, numpy {np.__version__}",
                "files": {}}
    for name, (ts, meta) in files.items():
        st.save_file(ts, os.path.join(out, name), metadata=meta)
    # Sharded checkpoint: two shards and an index.
    shard = {"model.embed.weight": random_tensor(rng, "BF16", (16, 8)), "model.norm.weight": random_tensor(rng, "F32", (8,))}
    shard2 = {"lm_head.weight": random_tensor(rng, "BF16", (16, 8)), "model.layers.0.w": random_tensor(rng, "F16", (8, 8))}
    st.save_file(shard, os.path.join(out, "model-00001-of-00002.safetensors"))
    st.save_file(shard2, os.path.join(out, "model-00002-of-00002.safetensors"))
    wm = {k: "model-00001-of-00002.safetensors" for k in shard}
    wm.update({k: "model-00002-of-00002.safetensors" for k in shard2})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 1}, "weight_map": wm}, f, indent=1)
    for name in list(files) + ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]:
        loaded = st.load_file(os.path.join(out, name))
        with safetensors.safe_open(os.path.join(out, name), framework="pt") as so:
            meta = so.metadata()
        expected["files"][name] = {"metadata": meta, "tensors": {
            k: {"dtype": dtype_name(v), "shape": list(v.shape), "sha256": sha(torch_bytes(v))} for k, v in loaded.items()}}
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


def dtype_name(t):
    import torch
    for k in ST_DTYPES + [k for k, a in OPTIONAL_DTYPES.items() if hasattr(torch, a)]:
        if torch_dtype(k) == t.dtype:
            return k
    raise ValueError(t.dtype)


NPY_DTYPES = ["|b1", "|i1", "|u1", "<i2", ">i2", "<u2", "<i4", ">i4", "<u4", "<i8", ">u8", "<u8",
              "<f2", ">f2", "<f4", ">f4", "<f8", ">f8", "<c8", ">c16", "<c16",
              # Last, so that the files before them stay as they were.
              "<M8[ns]", ">M8[s]", "<M8[10us]", "<M8", "<m8[D]", ">m8[3h]",
              "|S5", "<U3", ">U2", "|V4",
              # Structured dtypes (2026-11-29, twenty-second session): fields
              # back to back, a subarray, padding (offsets), nesting.
              [("x", "<f4"), ("n", ">i2", (3,))],
              {"names": ["a", "b"], "formats": ["u1", "<f8"], "offsets": [0, 8], "itemsize": 16},
              [("p", [("x", "<f4"), ("y", ">f4")]), ("id", "<u8"), ("tag", "|S3", (2, 2))],
              [("t", "<M8[us]"), ("s", "<U2", (2,)), ("ok", "|b1")]]


def descr(d):
    """The dtype as a .npy header spells it: a descr list for a structured
    one (str of numpy's descr), else the type string."""
    return str(d.descr) if d.fields is not None else d.str


def fix_fields(raw, d, n):
    """raw, n records of the structured dtype d, with its bool fields 0 or 1
    and its U fields code points (what NumPy would store)."""
    recs = raw.reshape(n, d.itemsize) if n else raw.reshape(0, d.itemsize)
    for name, (fd, off) in ((k, d.fields[k][:2]) for k in d.names):
        base = fd.base
        width = fd.itemsize
        if base.kind == "b":
            recs[:, off:off + width] &= 1
        elif base.kind == "U":
            cp = recs[:, off:off + width].copy().view("<u4") % 0x10F800
            cp[cp >= 0xD800] += 0x800
            recs[:, off:off + width] = cp.view(np.uint8)
    return recs.reshape(-1)


def header_fortran(path):
    """The fortran_order numpy wrote in the file's header."""
    with open(path, "rb") as f:
        ver = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if ver == (1, 0) else np.lib.format.read_array_header_2_0
        _, fo, _ = read(f)
    return bool(fo)


def make_npy(out, small):
    rng = np.random.default_rng(12)
    os.makedirs(out, exist_ok=True)
    shapes = [(), (0,), (5,), (3, 4), (2, 0, 3), (3, 4, 5)]
    expected = {"generator": f"numpy {np.__version__}", "files": {}}
    k = 0
    for dt in NPY_DTYPES:
        for shape in (shapes if not small else shapes[k % 4:k % 4 + 3]):
            for fortran in ((False, True) if len(shape) >= 2 else (False,)):
                d = np.dtype(dt)
                n = int(np.prod(shape)) if shape else 1
                raw = rng_bytes(rng, n * d.itemsize)
                if d.kind == "b":
                    raw &= 1
                if d.fields is not None:
                    raw = fix_fields(raw, d, n)
                if d.kind == "U":  # code points (no surrogates), in the dtype's order
                    cp = raw.view("<u4") % 0x10F800
                    cp[cp >= 0xD800] += 0x800
                    raw = cp.view("<U%d" % (d.itemsize // 4)).astype(d).view(np.uint8)
                a = raw.view(d).reshape(shape)
                if fortran:
                    a = np.asfortranarray(a)
                name = f"a{k:03d}.npy"
                k += 1
                np.save(os.path.join(out, name), a)
                b = np.load(os.path.join(out, name))
                fo = header_fortran(os.path.join(out, name))
                expected["files"][name] = array_entry(b, fo)
    # Version 2.0 (a header too long for 1.0) and 3.0 (a utf-8 header).
    big = np.arange(6, dtype="<i4").reshape(6, 1)
    for ver, name in (((2, 0), "v2.npy"), ((3, 0), "v3.npy")):
        with open(os.path.join(out, name), "wb") as f:
            np.lib.format.write_array(f, big, version=ver)
        expected["files"][name] = {"descr": "<i4", "fortran_order": False, "shape": [6, 1], "sha256": sha(big.tobytes())}
    np.save(os.path.join(out, "object.npy"), np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    expected["object"] = "object.npy"
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


def npz_arrays(rng):
    """The arrays of the .npz fixtures: dtypes of each kind, both byte
    orders, 0-d, empty, Fortran order, a structured dtype."""
    arrays = {}
    for i, dt in enumerate(["<f4", ">i8", "|b1", "<c16", "<M8[ns]", "|S4", [("x", "<f4"), ("n", ">i2", (3,))]]):
        d = np.dtype(dt)
        shape = [(7,), (3, 5), (), (0, 4), (2, 3, 4), (6,), (4, 3)][i]
        n = int(np.prod(shape)) if shape else 1
        raw = rng_bytes(rng, n * d.itemsize)
        if d.kind == "b":
            raw &= 1
        a = raw.view(d).reshape(shape)
        arrays["a%d" % i if i != 3 else "group/c"] = np.asfortranarray(a) if i == 1 else a
    return arrays


def make_npz(out):
    """NumPy's savez and savez_compressed of the same arrays (and of one
    positional array, arr_0), a savez archive with a member that is not a
    .npy file, and expected.json: per archive, per key, what npy files have
    in theirs."""
    import zipfile
    rng = np.random.default_rng(21)
    os.makedirs(out, exist_ok=True)
    arrays = npz_arrays(rng)
    pos = np.arange(10, dtype="<u2")
    np.savez(os.path.join(out, "plain.npz"), pos, **arrays)
    np.savez_compressed(os.path.join(out, "compressed.npz"), pos, **arrays)
    np.savez(os.path.join(out, "other.npz"), x=arrays["a0"])
    with zipfile.ZipFile(os.path.join(out, "other.npz"), "a") as z:
        z.writestr("notes.txt", "not an array")
    expected = {"generator": f"numpy {np.__version__}", "archives": {}}
    for name in ("plain.npz", "compressed.npz", "other.npz"):
        with np.load(os.path.join(out, name)) as f:
            entries = {}
            for k in f.files:
                if k == "notes.txt":
                    continue
                b = f[k]
                entries[k] = array_entry(b, b.flags.f_contiguous and not b.flags.c_contiguous)
            expected["archives"][name] = entries
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


def member_fortran(path, key):
    """The fortran_order in the header of the member key of an .npz."""
    import zipfile
    with zipfile.ZipFile(path) as z, z.open(key + ".npy") as f:
        ver = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if ver == (1, 0) else np.lib.format.read_array_header_2_0
        return bool(read(f)[1])


def make_npz_large(out, gb):
    """numpy.savez of one float32 array of about gb GB beside a small one
    (past 4 GiB: ZIP64 records), and expected.json as make_npz writes it."""
    os.makedirs(out, exist_ok=True)
    rows = max(1, int(gb * 1e9) // (4096 * 4))
    big = np.empty((rows, 4096), dtype=np.float32)
    rng = np.random.default_rng(5)
    for r in range(0, rows, 16384):
        big[r:r + 16384] = rng.standard_normal((min(16384, rows - r), 4096), dtype=np.float32)
    small = np.arange(7, dtype=">i8")
    np.savez(os.path.join(out, "large.npz"), big=big, small=small)
    entries = {k: array_entry(v, False) for k, v in (("big", big), ("small", small))}
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"generator": f"numpy {np.__version__}", "archives": {"large.npz": entries}}, f)
    print(f"wrote {out}/large.npz: {os.path.getsize(os.path.join(out, 'large.npz')) / 1e9:.2f} GB")


def check_npz(d):
    """NumPy loads each .npz that d/expected.json lists and compares
    every array with it (fortran_order as each member's header says)."""
    def got_want(name, entries):
        got = {}
        with np.load(os.path.join(d, name)) as f:
            for k in f.files:
                b = f[k]
                fo = member_fortran(os.path.join(d, name), k)
                if b.dtype.fields is not None:
                    # NumPy loads an archive's records field by field
                    # into memory it does not clear: padding as zeros.
                    c = np.zeros(b.shape, b.dtype, order="F" if fo else "C")
                    c[...] = b
                    b = c
                got[k] = array_entry(b, fo)
        return got, entries

    exp = json.load(open(os.path.join(d, "expected.json")))
    return tally("xcheck-npz", d, exp["archives"], got_want)


def samples_expected(d):
    """expected.json for the reference project's sample files (see
    safetensors/testdata/samples/SOURCE.md): each tensor named by a NumPy
    type code holds range(-3, 3) in that type, little-endian, metadata
    {"test": "a"}; overall.safetensors holds all of them."""
    names = {"B": "U8", "H": "U16", "I": "U32", "b": "I8", "d": "F64", "e": "F16", "f": "F32", "h": "I16", "i": "I32"}
    tensors = {}
    for code, dt in names.items():
        a = np.array(range(-3, 3)).astype("<" + code)  # astype wraps negatives for unsigned codes
        tensors[code] = {"dtype": dt, "shape": [6], "sha256": sha(a.tobytes())}
    files = {f"{c}.safetensors": {"metadata": {"test": "a"}, "tensors": {c: t}} for c, t in tensors.items()}
    files["overall.safetensors"] = {"metadata": {"test": "a"}, "tensors": tensors}
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump({"generator": f"numpy {np.__version__}, from the samples' documented recipe", "files": files},
                  f, indent=1, sort_keys=True)


def check(d):
    def got_want(name, e):
        p = os.path.join(d, name)
        if name.endswith(".npy"):
            got = array_entry(np.load(p), header_fortran(p))
            return got, {k: e[k] for k in got}
        import safetensors.torch as st, safetensors
        ts = st.load_file(p, device="cuda:0" if os.environ.get("XCHECK_CUDA") else "cpu")
        with safetensors.safe_open(p, framework="pt") as so:
            meta = so.metadata()
        got = {"metadata": meta, "tensors": {k: {"dtype": dtype_name(v), "shape": list(v.shape),
                                                 "sha256": sha(torch_bytes(v))} for k, v in ts.items()}}
        return got, {"metadata": e.get("metadata"), "tensors": e["tensors"]}

    exp = json.load(open(os.path.join(d, "expected.json")))
    return tally("xcheck", d, exp["files"], got_want)


def array_entry(b, fo):
    """What expected.json holds of an array: its dtype as a header spells
    it, fortran_order, shape and the sha256 of its bytes in that order."""
    return {"descr": descr(b.dtype), "fortran_order": bool(fo), "shape": list(b.shape),
            "sha256": sha(b.tobytes(order="F" if fo else "C"))}


def tally(label, d, items, got_want):
    """Compares got with want, as got_want(name, entry) returns them, for
    each item of expected.json; reports every failure, then the count."""
    ok = bad = 0
    for name, e in items.items():
        try:
            got, want = got_want(name, e)
            if got != want:
                raise AssertionError(f"got {got}\nwant {want}")
            ok += 1
        except Exception as ex:  # report every item, then fail
            print(f"FAIL {name}: {ex}")
            bad += 1
    print(f"{label} {d}: {ok} passed, {bad} failed")
    return bad == 0


if __name__ == "__main__":
    cmd, d = sys.argv[1], sys.argv[2]
    small = "--small" in sys.argv
    if cmd == "make-st":
        make_st(d, small)
    elif cmd == "make-npy":
        make_npy(d, small)
    elif cmd == "make-npz":
        make_npz(d)
    elif cmd == "make-npz-large":
        make_npz_large(d, float(sys.argv[3]))
    elif cmd == "check-npz":
        sys.exit(0 if check_npz(d) else 1)
    elif cmd == "samples-expected":
        samples_expected(d)
    elif cmd == "check":
        sys.exit(0 if check(d) else 1)
    else:
        sys.exit(f"unknown command {cmd}")
