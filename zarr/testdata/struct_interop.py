#!/usr/bin/env python3
"""The zarr-python side of TestZarrPythonStructured (zarr/struct_test.go):
Zarr v2 arrays of NumPy structured dtypes (records), as zarr-python 2
writes and reads them. Run by the Go test with a fresh directory DIR:

  struct_interop.py write DIR SEED
      zarr-python writes DIR/py.zarr/N, an array per (dtype, compressor,
      order), every element written (zarr-python 2.13 cannot write a
      structured array that has a fill value, and fills the rest of one
      without with whatever memory held). DIR/py-manifest.json lists
      them: path, the dtype's descr list (str(dtype.descr)), shape, and
      DIR/expect/N.bin, the records as zarr-python reads them back (C
      order, each field in its own byte order).

  struct_interop.py check DIR
      zarr-python reads what DIR/kvik-manifest.json (written by the Go
      test) lists and compares the .zarray's dtype (a JSON descr list)
      with the manifest's, and the record size, shape and bytes. Prints
      {"checked": N, "failures": [...]} and exits 1 if anything failed.
"""

import json
import os
import sys

import numcodecs
import numpy as np
import zarr

DTYPES = [
    [("x", "<f4"), ("n", ">i2", (3,))],
    {"names": ["a", "b"], "formats": ["u1", "<f8"], "offsets": [0, 8], "itemsize": 16},
    [("p", [("x", "<f4"), ("y", ">f4")]), ("id", "<u8"), ("tag", "|S3", (2, 2))],
    [("t", "<M8[us]"), ("s", "<U2", (2,)), ("ok", "|b1")],
]

COMPRESSORS = [None, numcodecs.Zlib(level=3), numcodecs.Zstd(level=1),
               numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
               numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.BITSHUFFLE),
               numcodecs.LZ4()]


def descr(d):
    return str(d.descr)


def write(root, seed):
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(root, "expect"), exist_ok=True)
    arrays = []
    k = 0
    for dt in DTYPES:
        d = np.dtype(dt)
        for comp in COMPRESSORS:
            order = "CF"[k % 2]
            ndim = 1 + k % 3
            shape = tuple(int(rng.integers(1, 12)) for _ in range(ndim))
            chunks = tuple(int(rng.integers(1, s + 1)) for s in shape)
            n = int(np.prod(shape))
            raw = rng.integers(0, 256, n * d.itemsize, dtype=np.uint8)
            path = "a%02d" % k
            z = zarr.open_array(os.path.join(root, "py.zarr", path), mode="w", shape=shape, chunks=chunks,
                                dtype=d, compressor=comp, order=order, fill_value=None)
            # zarr-python reads padding ("" in the descr) back as a field
            # named f1: the values take the array's dtype.
            z[...] = raw.view(z.dtype).reshape(shape)
            got = np.asarray(zarr.open_array(os.path.join(root, "py.zarr", path), mode="r")[...])
            expect = os.path.join("expect", "%d.bin" % k)
            with open(os.path.join(root, expect), "wb") as f:
                f.write(np.ascontiguousarray(got).tobytes())
            arrays.append({"path": path, "dtype": descr(d), "shape": list(shape), "expect": expect})
            k += 1
    with open(os.path.join(root, "py-manifest.json"), "w") as f:
        json.dump({"arrays": arrays, "versions": {"zarr": zarr.__version__, "numpy": np.__version__}}, f)


def check(root):
    with open(os.path.join(root, "kvik-manifest.json")) as f:
        manifest = json.load(f)
    failures, checked = [], 0
    for a in manifest["arrays"]:
        what = a["path"]
        try:
            z = zarr.open_array(os.path.join(root, a["path"]), mode="r")
            with open(os.path.join(root, a["path"], ".zarray")) as f:
                stored = json.load(f)["dtype"]
            if stored != a["dtype"] or z.dtype.itemsize != a["itemsize"] or list(z.shape) != a["shape"]:
                failures.append("%s: dtype %s (%d bytes) shape %s, want %s (%d) %s" % (
                    what, stored, z.dtype.itemsize, z.shape, a["dtype"], a["itemsize"], a["shape"]))
                continue
            got = np.ascontiguousarray(np.asarray(z[...])).tobytes()
            with open(os.path.join(root, a["expect"]), "rb") as f:
                want = f.read()
            if got != want:
                first = next(i for i in range(min(len(got), len(want))) if got[i] != want[i]) if len(got) == len(want) else -1
                failures.append("%s: %d bytes differ from the expected %d (first at byte %d)" % (what, len(got), len(want), first))
                continue
            checked += 1
        except Exception as e:  # noqa: BLE001 -- every failure is reported
            failures.append("%s: %r" % (what, e))
    json.dump({"checked": checked, "failures": failures}, sys.stdout)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("write", "check"):
        sys.exit("usage: struct_interop.py write DIR SEED | check DIR")
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    else:
        sys.exit(check(sys.argv[2]))
