#!/usr/bin/env python3
"""TensorStore side of TestTensorStoreStructured: for each entry of the
JSON manifest (argv[1]), opens each named field of the v2 array of a
structured dtype kvik wrote at "kvik" (TensorStore's zarr driver opens
one field at a time) and checks its values bit for bit against the
records in "data" (C order, as stored); then creates an array at "ts"
with kvik's metadata and writes each field of "data" into it, for kvik
to read. Prints one line per entry; exits 1 on the first difference."""
import json
import sys

import numpy as np
import tensorstore as ts


def as_le(a):
    """a's values with little-endian elements, for a bitwise comparison."""
    return np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"))).tobytes()


def main():
    for e in json.load(open(sys.argv[1])):
        meta = json.load(open(e["kvik"] + "/.zarray"))
        dtype = np.dtype([tuple(f[:1] + [f[1]] + ([tuple(f[2])] if len(f) > 2 else [])) for f in meta["dtype"]])
        want = np.fromfile(e["data"], dtype=dtype).reshape(meta["shape"])
        for name in dtype.names:
            got = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": e["kvik"]}, "field": name}).result().read().result()
            if as_le(got) != as_le(want[name]):
                print(f"{e['kvik']}: TensorStore reads other values of field {name} than kvik wrote")
                sys.exit(1)
        spec_meta = {k: meta[k] for k in ("shape", "chunks", "dtype", "compressor", "fill_value", "order", "filters")}
        # One transaction for every field's write: written one open at a
        # time, each field's chunks replaced the fields written before
        # with the fill value.
        ctx, txn = ts.Context(), ts.Transaction()
        for i, name in enumerate(dtype.names):
            out = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": e["ts"]}, "metadata": spec_meta,
                           "field": name, "create": i == 0, "delete_existing": i == 0, "open": i > 0}, context=ctx).result()
            out.with_transaction(txn).write(want[name]).result()
        txn.commit_sync()
        print(f"{e['kvik']}: {len(dtype.names)} fields read back exact; {e['ts']} written field by field")


if __name__ == "__main__":
    main()
