#!/usr/bin/env python3
"""TensorStore side of TestTensorStoreInterop: for each entry of the JSON
manifest (argv[1]), reads the v3 array kvik wrote at "kvik" with
TensorStore and checks it byte for byte against "data" (little-endian,
C order), then creates an array at "ts" with kvik's metadata (the same
codecs) and writes "data" into it with TensorStore, for kvik to read.
Prints one line per entry; exits 1 on the first difference."""
import json
import sys

import numpy as np
import tensorstore as ts


def main():
    for e in json.load(open(sys.argv[1])):
        meta = json.load(open(e["kvik"] + "/zarr.json"))
        dtype = np.dtype(meta["data_type"]).newbyteorder("<")
        want = np.fromfile(e["data"], dtype=dtype).reshape(meta["shape"])
        got = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": e["kvik"]}}).result().read().result()
        if got.shape != want.shape or got.astype(dtype).tobytes() != want.tobytes():
            print(f"{e['kvik']}: TensorStore reads other values than kvik wrote")
            sys.exit(1)
        spec_meta = {k: meta[k] for k in ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "codecs", "fill_value")}
        out = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": e["ts"]}, "metadata": spec_meta,
                       "create": True, "delete_existing": True}).result()
        out.write(want).result()
        print(f"{e['kvik']}: read back exact; {e['ts']} written")


if __name__ == "__main__":
    main()
