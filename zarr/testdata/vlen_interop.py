#!/usr/bin/env python3
"""The zarr-python side of TestStringArraysZarrPython (zarr/vlen_test.go):
arrays of variable-length strings and bytes, Zarr format 2, as
zarr-python 2 writes them (NumPy object arrays; numcodecs' VLenUTF8 and
VLenBytes as the object codec).

  vlen_interop.py write STORE MANIFEST
      For each array of MANIFEST (JSON: path, kind "str" or "bytes",
      shape, chunks, compressor "none"/"blosc"/"zstd"/"zlib", order, fill or
      null, values in C order (base64 for bytes), nulls), zarr-python
      creates STORE/path and writes it chunk by chunk: a chunk whose
      elements are all null is left missing; in the others a null
      element holds the fill value ("" or b"" without one).

  vlen_interop.py read STORE MANIFEST
      zarr-python reads each array of MANIFEST from STORE (written by
      kvik) and prints [{"path", "values"}] as JSON, an element read as
      None (a missing chunk without a fill value) as "".
"""

import base64
import itertools
import json
import sys

import numcodecs
import numpy as np
import zarr


def compressor(name):
    return {
        "none": None,
        "blosc": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
        "zstd": numcodecs.Zstd(level=3),
        "zlib": numcodecs.Zlib(level=5),
    }[name]


def decode(kind, v):
    return base64.b64decode(v) if kind == "bytes" else v


def write(store, entries):
    root = zarr.open_group(store, mode="w")
    for e in entries:
        kind = e["kind"]
        codec = numcodecs.VLenUTF8() if kind == "str" else numcodecs.VLenBytes()
        fill = e["fill"]
        z = root.create_dataset(e["path"], shape=e["shape"], chunks=e["chunks"], dtype=object, order=e["order"],
                                object_codec=codec, compressor=compressor(e["compressor"]), fill_value=fill)
        empty = (fill if fill is not None else "") if kind == "str" else b""
        values = np.empty(len(e["values"]), dtype=object)
        for i, (v, null) in enumerate(zip(e["values"], e["nulls"])):
            values[i] = empty if null else decode(kind, v)
        nulls = np.array(e["nulls"], dtype=bool).reshape(e["shape"])
        values = values.reshape(e["shape"])
        grid = [range(0, s, c) for s, c in zip(e["shape"], e["chunks"])]
        for origin in itertools.product(*grid):
            sel = tuple(slice(o, min(o + c, s)) for o, c, s in zip(origin, e["chunks"], e["shape"]))
            if nulls[sel].all():
                continue
            z[sel] = values[sel]


def read(store, entries):
    out = []
    for e in entries:
        z = zarr.open_array(store, mode="r", path=e["path"])
        if z.order != e["order"]:
            raise SystemExit("%s: order %s, want %s" % (e["path"], z.order, e["order"]))
        got = []
        for v in z[...].reshape(-1):
            if v is None:
                v = ""
            if isinstance(v, bytes):
                v = base64.b64encode(v).decode()
            got.append(v)
        out.append({"path": e["path"], "values": got})
    json.dump(out, sys.stdout)


def main():
    mode, store, manifest = sys.argv[1:4]
    with open(manifest) as f:
        entries = json.load(f)
    {"write": write, "read": read}[mode](zarr.DirectoryStore(store), entries)


if __name__ == "__main__":
    main()
