#!/usr/bin/env python3
"""The reverse check: reads the GGUF files that kvik wrote into DIR (see
TestWriteForPython in gguf/device_test.go) with gguf-py's GGUFReader and
compares every metadata key, type and value and every tensor's name, type,
shape, offset, size and bytes with DIR/expected.json.

    PYTHONPATH=/path/to/gguf-py python3 xcheck.py DIR

Prints one line per file and a closing 'xcheck: N passed, M failed' line;
exits 1 on any difference.
"""
import hashlib
import json
import os
import struct
import sys

from gguf import GGUFReader, GGUFValueType as VT


def py(ev):
    """An expected value as gguf-py's ReaderField.contents() returns it:
    arrays of arrays flattened, floats decoded from their hex bytes."""
    t = ev["type"]
    if t == "ARRAY":
        if ev["elem"] == "ARRAY":
            return [x for inner in ev["value"] for x in py(inner)]
        return [py({"type": ev["elem"], "value": x}) for x in ev["value"]]
    if t in ("FLOAT32", "FLOAT64"):
        return struct.unpack("<f" if t == "FLOAT32" else "<d", bytes.fromhex(ev["value"]))[0]
    return ev["value"]


def check_file(path, ef):
    errs = []
    r = GGUFReader(path)
    fields = [f for name, f in r.fields.items() if not name.startswith("GGUF.")]
    if [f.name for f in fields] != [m["key"] for m in ef["metadata"]]:
        errs.append("keys differ: %s" % [f.name for f in fields])
    for f, m in zip(fields, ef["metadata"]):
        if f.types[0].name != m["type"]:
            errs.append("%s: type %s, want %s" % (f.name, f.types[0].name, m["type"]))
        if m["type"] == "ARRAY" and VT(int(f.parts[3][0])).name != m["elem"]:
            errs.append("%s: array of %s, want %s" % (f.name, VT(int(f.parts[3][0])).name, m["elem"]))
        if f.contents() != py(m):
            errs.append("%s: %r, want %r" % (f.name, f.contents(), py(m)))
    if len(r.tensors) != len(ef["tensors"]):
        errs.append("%d tensors, want %d" % (len(r.tensors), len(ef["tensors"])))
    at = 0
    for t, e in zip(r.tensors, ef["tensors"]):
        got = (t.name, t.tensor_type.name, [int(d) for d in t.shape], int(t.n_bytes),
               hashlib.sha256(t.data.tobytes()).hexdigest())
        want = (e["name"], e["type"], e["shape"], e["n_bytes"], e["sha256"])
        if got != want:
            errs.append("tensor %s: %s, want %s" % (e["name"], got, want))
        if t.data_offset - r.data_offset < at or (t.data_offset - r.data_offset) % r.alignment:
            errs.append("tensor %s at %d" % (e["name"], t.data_offset))
        at = t.data_offset - r.data_offset + t.n_bytes
    return errs, len(r.tensors), len(fields)


def main(d):
    with open(os.path.join(d, "expected.json")) as fh:
        e = json.load(fh)
    passed = failed = 0
    for name, ef in sorted(e["files"].items()):
        try:
            errs, nt, nk = check_file(os.path.join(d, name), ef)
        except Exception as ex:  # a file gguf-py cannot read at all
            errs, nt, nk = ["GGUFReader: %r" % ex], 0, 0
        if errs:
            failed += 1
            print("%s: FAIL\n  %s" % (name, "\n  ".join(errs[:10])))
        else:
            passed += 1
            print("%s: ok (%d tensors, %d keys)" % (name, nt, nk))
    print("xcheck (%s): %d passed, %d failed" % (e.get("generator", "?"), passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
