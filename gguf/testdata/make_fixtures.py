#!/usr/bin/env python3
"""Writes the GGUF fixtures of gguf/testdata with gguf-py's GGUFWriter, and
expected.json: every metadata value with its GGUF type, and every tensor's
type, shape (ggml order: ne[0] first), offset, size and the sha256 of the
bytes this script handed to the writer.

    PYTHONPATH=/path/to/llama.cpp/gguf-py python3 make_fixtures.py OUTDIR

Needs only numpy and gguf-py (see SOURCE.md for the version used). The
random bytes come from a fixed seed, so a rerun with the same gguf-py
writes the same files.
"""
import hashlib
import json
import os
import struct
import sys

import numpy as np
from gguf import GGUFWriter, GGUFReader, GGUFEndian, GGUFValueType as VT, GGMLQuantizationType as QT, GGML_QUANT_SIZES

rng = np.random.default_rng(20)

SCALARS = {  # value type -> (struct format, example values)
    VT.UINT8: ("<B", [0, 7, 255]),
    VT.INT8: ("<b", [-128, -1, 127]),
    VT.UINT16: ("<H", [0, 513, 65535]),
    VT.INT16: ("<h", [-32768, -2, 32767]),
    VT.UINT32: ("<I", [0, 70000, 4294967295]),
    VT.INT32: ("<i", [-2147483648, -3, 2147483647]),
    VT.FLOAT32: ("<f", [1.5, -0.0, 3.4028234663852886e38]),
    VT.BOOL: ("<?", [True, False, True]),
    VT.UINT64: ("<Q", [0, 1 << 40, 18446744073709551615]),
    VT.INT64: ("<q", [-9223372036854775808, -5, 9223372036854775807]),
    VT.FLOAT64: ("<d", [2.5e-300, -1.25, 1e300]),
}


def jvalue(vtype, v, elem=None):
    """The expected.json form of a value: floats as the hex of their
    little-endian bytes, so the test compares them bit for bit."""
    if vtype == VT.ARRAY:
        if elem == VT.ARRAY:
            return {"type": "ARRAY", "elem": "ARRAY", "value": [jvalue(VT.ARRAY, x[1], x[0]) for x in v]}
        return {"type": "ARRAY", "elem": elem.name, "value": [jvalue(elem, x)["value"] for x in v]}
    if vtype in (VT.FLOAT32, VT.FLOAT64):
        return {"type": vtype.name, "value": struct.pack(SCALARS[vtype][0], v).hex()}
    return {"type": vtype.name, "value": v}


class Fixture:
    def __init__(self, path, arch, **kw):
        self.w = GGUFWriter(path, arch, **kw)
        self.meta = [("general.architecture", {"type": "STRING", "value": arch})]
        self.tensors = []

    def kv(self, key, vtype, v, elem=None):
        if vtype == VT.ARRAY and elem == VT.ARRAY:
            # gguf-py infers each inner array's type from its first item;
            # pack nested arrays of typed items through sub-writers' values.
            self.w.add_key_value(key, [x[1] for x in v], VT.ARRAY, sub_type=VT.ARRAY)
        else:
            self.w.add_key_value(key, v, vtype, sub_type=elem)
        self.meta.append((key, jvalue(vtype, v, elem)))

    def tensor(self, name, qtype, shape):
        """A tensor of random bytes: shape in NumPy order (rows last)."""
        block, tsize = GGML_QUANT_SIZES[qtype]
        nelem = int(np.prod(shape))
        nbytes = nelem // block * tsize
        raw = rng.integers(0, 256, size=nbytes, dtype=np.uint8)
        native = {QT.F32: np.float32, QT.F16: np.float16, QT.F64: np.float64, QT.I8: np.int8,
                  QT.I16: np.int16, QT.I32: np.int32, QT.I64: np.int64}
        if qtype in native:
            arr = raw.view(native[qtype]).reshape(shape)
            self.w.add_tensor(name, arr)
        else:
            byte_shape = (*shape[:-1], shape[-1] // block * tsize)
            self.w.add_tensor(name, raw.reshape(byte_shape), raw_dtype=qtype)
        self.tensors.append({"name": name, "type": qtype.name, "type_id": int(qtype),
                             "shape": list(reversed(shape)), "n_bytes": nbytes,
                             "sha256": hashlib.sha256(raw.tobytes()).hexdigest()})

    def close(self):
        self.w.write_header_to_file()
        self.w.write_kv_data_to_file()
        self.w.write_tensors_to_file()
        self.w.close()


def all_metadata(f):
    for vt, (_, vals) in SCALARS.items():
        f.kv("test.scalar." + vt.name.lower(), vt, vals[1])
        f.kv("test.array." + vt.name.lower(), VT.ARRAY, vals, vt)
    f.kv("test.scalar.string", VT.STRING, "héllo, GGUF")
    f.kv("test.scalar.empty_string", VT.STRING, "")
    f.kv("test.array.string", VT.ARRAY, ["a", "", "ünïcode", "x" * 300], VT.STRING)
    f.kv("test.nested", VT.ARRAY, [(VT.INT32, [1, -2, 3]), (VT.INT32, [4]), (VT.STRING, ["p", "q"])], VT.ARRAY)
    f.kv("llama.context_length", VT.UINT32, 4096)
    f.kv("llama.embedding_length", VT.UINT32, 256)
    f.kv("llama.block_count", VT.UINT32, 2)
    f.kv("general.name", VT.STRING, "kvik fixture")
    f.kv("tokenizer.ggml.model", VT.STRING, "gpt2")
    f.kv("tokenizer.ggml.tokens", VT.ARRAY, ["<s>", "</s>", "a", "b", "ab", "Ġthe"], VT.STRING)
    f.kv("tokenizer.ggml.scores", VT.ARRAY, [0.0, -1.0, -2.5, -3.25, -4.0, -5.5], VT.FLOAT32)
    f.kv("tokenizer.ggml.token_type", VT.ARRAY, [3, 3, 1, 1, 1, 1], VT.INT32)


def every_type(f):
    """One tensor of every type gguf-py knows, shapes of 1 to 4 dimensions,
    but Q8_1: gguf-py sizes its blocks 40 bytes (two float32 scales), while
    ggml's block_q8_1 has been 36 (two float16) for long; kvik follows ggml."""
    for i, qt in enumerate(GGML_QUANT_SIZES):
        if qt == QT.Q8_1:
            continue
        block = GGML_QUANT_SIZES[qt][0]
        shapes = [(block * 2,), (3, block), (2, 1, block * 2), (1, 2, 1, block)]
        f.tensor("blk.%d.%s.weight" % (i, qt.name.lower()), qt, shapes[i % 4])
    f.tensor("empty.weight", QT.F32, (0, 4))  # no bytes at all
    f.tensor("odd.bias", QT.F16, (7,))  # 14 bytes: padding follows


def main(out):
    os.makedirs(out, exist_ok=True)
    files = {}

    def record(name, f, **extra):
        r = GGUFReader(os.path.join(out, name)) if extra.get("error") is None else None
        e = {"metadata": [{"key": k, **v} for k, v in f.meta], "tensors": f.tensors, **extra}
        if r is not None:
            e["data_offset"] = int(r.data_offset)
            e["alignment"] = int(r.alignment)
            for t, rt in zip(f.tensors, r.tensors):
                t["offset"] = int(rt.data_offset) - int(r.data_offset)
        files[name] = e

    f = Fixture(os.path.join(out, "all_types.gguf"), "llama")
    all_metadata(f)
    every_type(f)
    f.close()
    record("all_types.gguf", f, version=3)

    for align in (8, 1024):
        name = "align%d.gguf" % align
        f = Fixture(os.path.join(out, name), "llama")
        f.w.add_custom_alignment(align)
        f.meta.append(("general.alignment", jvalue(VT.UINT32, align)))
        f.kv("llama.context_length", VT.UINT32, 128)
        f.tensor("token_embd.weight", QT.Q8_0, (4, 64))
        f.tensor("norm.weight", QT.F32, (5,))
        f.tensor("output.weight", QT.Q4_K, (2, 256))
        f.tensor("bf16.weight", QT.BF16, (3, 3))
        f.close()
        record(name, f, version=3)

    f = Fixture(os.path.join(out, "no_tensors.gguf"), "bert")
    f.kv("bert.context_length", VT.UINT64, 512)
    f.close()
    record("no_tensors.gguf", f, version=3)

    # GGUF v2 has v3's layout (v3 added big-endian files): the same bytes
    # with the version field set to 2.
    f = Fixture(os.path.join(out, "v2.gguf"), "gpt2")
    f.kv("gpt2.context_length", VT.UINT32, 1024)
    f.tensor("wte.weight", QT.F16, (3, 8))
    f.tensor("h.0.attn.weight", QT.Q5_1, (2, 32))
    f.close()
    with open(os.path.join(out, "v2.gguf"), "r+b") as fh:
        fh.seek(4)
        fh.write(struct.pack("<I", 2))
    record("v2.gguf", f, version=2)

    f = Fixture(os.path.join(out, "bigendian.gguf"), "llama", endianess=GGUFEndian.BIG)
    f.kv("llama.context_length", VT.UINT32, 64)
    f.tensor("w", QT.F32, (4,))
    f.close()
    record("bigendian.gguf", f, error="big-endian")

    gen = "gguf-py GGUFWriter (make_fixtures.py, numpy %s)" % np.__version__
    with open(os.path.join(out, "expected.json"), "w") as fh:
        json.dump({"generator": gen, "files": files}, fh, indent=1, ensure_ascii=False)
        fh.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
