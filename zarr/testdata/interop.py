#!/usr/bin/env python3
"""The zarr-python side of TestZarrPythonInterop (zarr/interop_test.go).

Zarr format 2, as zarr-python 2 writes it (Debian: python3-zarr 2.13,
python3-numcodecs 0.11). Run by the Go test with a fresh directory DIR:

  interop.py write DIR [SEED]
      zarr-python writes DIR/py.zarr: arrays of every dtype (both byte
      orders), compressor (zlib, gzip, zstd, LZ4, BZ2, blosc with each inner
      compressor and shuffle), Delta filters, fill value, order,
      dimension separator and rank 0 to 5, in nested groups, some
      partly written, two under a directory with no .zgroup, with
      consolidated metadata. DIR/py-manifest.json describes them; each
      array as zarr-python reads it back is in DIR/expect/py/N.bin
      (little-endian, C order: what kvik's ReadRegion returns).

  interop.py check DIR
      zarr-python reads what DIR/kvik-manifest.json (written by the Go
      test) lists, consolidated and not, and compares dtype, shape,
      values (NaN equal to NaN) and attributes with it, and each store's
      array tree. Prints {"checked": N, "failures": [...]} as JSON and
      exits 1 if anything failed.
"""

import json
import os
import sys
import warnings

import numpy as np
import numcodecs
import zarr

# Array dtypes: 14 types, both byte orders where they have one,
# datetime64 and timedelta64 of several units and scales, and
# fixed-length bytes and UTF-32 strings (not void: zarr-python 2.13
# fills a V array made without a fill value with whatever memory held,
# and fails to make one with a fill value).
DTYPES = ["|b1", "|i1", "|u1"] + [e + t for t in ("i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "c16") for e in "<>"] + \
    ["<M8[ns]", ">M8[s]", "<M8[10us]", ">M8[D]", "<m8[ms]", ">m8[3h]", "<m8[us]", "|S1", "|S7", "<U3", ">U5"]

# (dtype, astype) pairs of Delta filters beyond dtype == astype: wider
# and narrower encodings.
DELTA_PAIRS = [
    ("<f4", "<f8"), ("<f2", "<f4"), ("<f2", "<f8"), (">f4", "<f8"), ("<f8", "<f4"),
    ("<f4", "<f2"), ("<i2", "<i4"), ("<u1", "<u2"), (">i4", ">i8"), ("<i4", "<i2"),
    ("<u4", "<i8"), ("|i1", "<i2"),
]


def compressors(k):
    """The compressors of the k-th dtype: every non-blosc one, and blosc
    with each shuffle, the inner compressor turning with k so that each
    (compressor, shuffle) pair is used by four dtypes."""
    out = [None, numcodecs.Zlib(level=1), numcodecs.Zlib(level=9), numcodecs.GZip(level=5),
           numcodecs.Zstd(level=1), numcodecs.Zstd(level=5), numcodecs.Zstd(level=-3),
           numcodecs.LZ4(acceleration=1), numcodecs.LZ4(acceleration=20), numcodecs.BZ2(level=1)]
    cnames = ("lz4", "lz4hc", "zstd", "zlib", "blosclz")
    for j, shuffle in enumerate((numcodecs.Blosc.NOSHUFFLE, numcodecs.Blosc.SHUFFLE,
                                 numcodecs.Blosc.BITSHUFFLE, numcodecs.Blosc.AUTOSHUFFLE)):
        out.append(numcodecs.Blosc(cname=cnames[(k + j) % len(cnames)], clevel=1 + (k + j) % 9, shuffle=shuffle))
    return out


def values(rng, dt, n, specials=True):
    """n random values of dtype dt, never all zero."""
    dt = np.dtype(dt)
    if dt.kind == "S":  # any bytes, NULs among them
        v = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8)
        v[rng.integers(0, len(v))] = 1
        return np.frombuffer(v.tobytes(), dtype=dt).copy()
    if dt.kind == "U":  # code points of every plane, no surrogates
        v = rng.integers(1, 0x10F800, n * dt.itemsize // 4, dtype=np.uint32)
        v[v >= 0xD800] += 0x800
        return v.view("<U%d" % (dt.itemsize // 4)).astype(dt)
    if dt.kind == "b":
        v = rng.integers(0, 2, n).astype(bool)
        v[rng.integers(0, n)] = True
        return v.astype(dt)
    if dt.kind == "c":  # real and imaginary parts, each a float's
        half = np.dtype("f%d" % (dt.itemsize // 2))
        v = np.empty(n, dtype=dt.newbyteorder("="))
        v.real, v.imag = values(rng, half, n, specials), values(rng, half, n, specials)
        return v.astype(dt)
    if dt.kind in "mM":  # any int64, NaT (its smallest) among them
        v = rng.integers(-2**63, 2**63 - 1, n, endpoint=True, dtype=np.int64)
        v[v == 0] = 1
        if specials and n > 4:
            v[rng.integers(0, n)] = -2**63
        return v.view(dt.newbyteorder("=")).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(info.min, info.max, n, endpoint=True, dtype=dt.newbyteorder("="))
        v[v == 0] = 1
        return v.astype(dt)
    scale = 100.0 if dt.itemsize == 2 else 1e4
    v = rng.standard_normal(n) * scale * rng.choice([1e-3, 1.0], n)
    if specials and n > 4:
        for s in (np.nan, np.inf, -np.inf, -0.0):
            v[rng.integers(0, n)] = s
    return v.astype(dt)


def random_shape(rng, ndim):
    """A shape of rank ndim and chunks that do not always divide it, at
    most 4000 elements in at most 24 chunks."""
    while True:
        shape = [int(rng.integers(1, {1: 200, 2: 40, 3: 14, 4: 8, 5: 6}.get(ndim, 1) + 1)) for _ in range(ndim)]
        chunks = [int(rng.integers(1, s + 3)) for s in shape]
        grid = np.prod([-(-s // c) for s, c in zip(shape, chunks)])
        if int(np.prod(shape)) <= 4000 and grid <= 24:
            return tuple(shape), tuple(chunks)


def fill_for(rng, dt):
    dt = np.dtype(dt)
    if dt.kind in "SU":  # None would leave zarr-python 2.13 the memory's bytes
        return [values(rng, dt, 1)[0], dt.type()][rng.integers(0, 2)]
    if dt.kind == "b":
        return [False, True, None][rng.integers(0, 3)]
    if dt.kind in "mM":
        return [0, None, int(values(rng, dt, 1, False).view("i8")[0]), np.datetime64("NaT") if dt.kind == "M" else np.timedelta64("NaT")][rng.integers(0, 4)]
    choices = [0, None, values(rng, dt, 1, False)[0].item()]
    if dt.kind == "f":
        choices += [np.nan, np.inf, -np.inf]
    if dt.kind == "c":
        # Imaginary parts finite: zarr-python 2 decodes a fill value as
        # re + 1j * im, so an infinite or NaN one makes the real part NaN.
        choices += [complex(np.nan, 1.5), complex(-np.inf, 2.0)]
    return choices[rng.integers(0, len(choices))]


def le_bytes(a):
    """a as little-endian C-order bytes."""
    return np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"))).tobytes()


def write(root_dir, seed):
    rng = np.random.default_rng(seed)
    path = os.path.join(root_dir, "py.zarr")
    store = zarr.DirectoryStore(path)
    zarr.group(store=store)
    os.makedirs(os.path.join(root_dir, "expect", "py"), exist_ok=True)
    specs = []
    for k, dt in enumerate(DTYPES):
        for comp in compressors(k):
            specs.append((dt, comp, None))
    for k, dt in enumerate(DTYPES):
        if dt != "|b1" and dt[1] not in "cmMSU":  # no Delta of bools, complex numbers, times or strings
            specs.append((dt, compressors(k)[k % 11], (dt, dt)))
    for pair in DELTA_PAIRS:
        for comp in (None, numcodecs.Zstd(level=1), numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE)):
            specs.append((pair[0], comp, pair))
    groups = ["", "g1", "g1/g2", "g1/g2/g3", "g4", "nogroup"]
    arrays = []
    for i, (dt, comp, delta) in enumerate(specs):
        ndim = int(rng.integers(0, 6)) if i % 10 else 0
        shape, chunks = random_shape(rng, ndim)
        fill = fill_for(rng, dt)
        order = "CF"[rng.integers(0, 2)]
        sep = "./"[rng.integers(0, 2)]
        grp = groups[i % len(groups)]
        name = (grp + "/" if grp else "") + "a%d" % i
        filters = [numcodecs.Delta(dtype=delta[0], astype=delta[1])] if delta else None
        z = zarr.create(shape=shape, chunks=chunks, dtype=dt, compressor=comp, fill_value=fill,
                        order=order, store=store, path=name, filters=filters,
                        dimension_separator=sep, overwrite=True)
        data = values(rng, dt, int(np.prod(shape)), specials=delta is None).reshape(shape)
        if fill is None or ndim == 0 or rng.integers(0, 3):
            z[...] = data
        else:
            # Partial writes: two random boxes, the rest left to the fill value.
            for _ in range(2):
                lo = [int(rng.integers(0, s)) for s in shape]
                hi = [int(rng.integers(l + 1, s + 1)) for l, s in zip(lo, shape)]
                box = tuple(slice(l, h) for l, h in zip(lo, hi))
                z[box] = data[box]
        got = z[...]
        with open(os.path.join(root_dir, "expect", "py", "%d.bin" % i), "wb") as f:
            f.write(le_bytes(np.asarray(got)))
        arrays.append({"path": name, "dtype": z.dtype.str, "shape": list(shape),
                       "expect": "expect/py/%d.bin" % i})
    # A directory that is no group: zarr-python's tree leaves out what it holds.
    os.remove(os.path.join(path, "nogroup", ".zgroup"))
    zarr.consolidate_metadata(store)
    manifest = {"arrays": arrays, "tree": tree(zarr.open_group(store, mode="r")),
                "versions": {"zarr": zarr.__version__, "numcodecs": numcodecs.__version__, "numpy": np.__version__}}
    with open(os.path.join(root_dir, "py-manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def tree(group):
    paths = []
    group.visititems(lambda name, obj: paths.append(name) if isinstance(obj, zarr.Array) else None)
    return sorted(paths)


def differ(got, want):
    """Where got and want differ: NaN equal to NaN, NaT to NaT (their
    int64s are compared)."""
    if got.dtype.kind in "mM":
        return got.view(got.dtype.str[0] + "i8") != want.view(want.dtype.str[0] + "i8")
    if got.dtype.kind in "fc":
        return ~((got == want) | (np.isnan(got) & np.isnan(want)))
    return got != want


def same(got, want):
    return got.shape == want.shape and not differ(got, want).any()


def check(root_dir):
    with open(os.path.join(root_dir, "kvik-manifest.json")) as f:
        manifest = json.load(f)
    failures, checked = [], 0

    def fail(what, err):
        failures.append("%s: %s" % (what, err))

    opened = {}
    for name, want_tree in sorted(manifest["trees"].items()):
        store = zarr.DirectoryStore(os.path.join(root_dir, name))
        for how, opener in (("consolidated", lambda: zarr.open_consolidated(store, mode="r")),
                            ("plain", lambda: zarr.open_group(store, mode="r"))):
            try:
                g = opener()
                opened[(name, how)] = g
                got = tree(g)
                if got != sorted(want_tree):
                    fail("%s (%s) tree" % (name, how), "got %s, want %s" % (got, sorted(want_tree)))
            except Exception as e:  # noqa: BLE001 -- every failure is reported
                fail("%s (%s) open" % (name, how), repr(e))
    for a in manifest["arrays"]:
        in_tree = a["path"] in manifest["trees"][a["store"]]
        for how in ("consolidated", "plain") if in_tree else ("by path",):
            what = "%s/%s (%s)" % (a["store"], a["path"], how)
            g = opened.get((a["store"], how))
            if in_tree and g is None:
                continue
            try:
                if in_tree:
                    z = g[a["path"]]
                else:
                    store = zarr.DirectoryStore(os.path.join(root_dir, a["store"]))
                    z = zarr.open_array(store, path=a["path"], mode="r")
                if z.dtype.str != a["dtype"] or list(z.shape) != a["shape"]:
                    fail(what, "dtype %s shape %s, want %s %s" % (z.dtype.str, z.shape, a["dtype"], a["shape"]))
                    continue
                got = np.asarray(z[...])
                with open(os.path.join(root_dir, a["expect"]), "rb") as f:
                    want = np.frombuffer(f.read(), dtype=z.dtype.newbyteorder("<")).reshape(z.shape)
                if not same(got, want):
                    bad = np.argwhere(differ(got, want))
                    fail(what, "%d values differ, first at %s: %r, want %r" % (
                        len(bad), bad[0].tolist(), got[tuple(bad[0])], want[tuple(bad[0])]))
                    continue
                if "attrs" in a and z.attrs.asdict() != a["attrs"]:
                    fail(what, "attributes %r, want %r" % (z.attrs.asdict(), a["attrs"]))
                    continue
                checked += 1
            except Exception as e:  # noqa: BLE001
                fail(what, repr(e))
    json.dump({"checked": checked, "failures": failures}, sys.stdout)
    return 1 if failures else 0


if __name__ == "__main__":
    warnings.simplefilter("ignore")  # overflows and NaN casts are meant
    np.seterr(all="ignore")
    if len(sys.argv) < 3 or sys.argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    else:
        sys.exit(check(sys.argv[2]))
