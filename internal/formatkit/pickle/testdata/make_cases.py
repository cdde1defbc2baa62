"""Writes cases.jsonl: Python values pickled at protocols 2 to 5, each
with its canonical form (canon below), which pickle_test.go compares
with what Decode makes of the pickle. Run with python3 from this folder;
the output is deterministic (sets hold ints only: no hash seed)."""
import collections, json, pickle, struct, sys

def canon(v):
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return {"int": str(v)}
    if isinstance(v, float):
        return {"float": struct.pack(">d", v).hex()}
    if isinstance(v, str):
        return {"str": v}
    if isinstance(v, (bytes, bytearray)):
        return {"bytes": bytes(v).hex()}
    if isinstance(v, tuple):
        return {"tuple": [canon(x) for x in v]}
    if isinstance(v, list):
        return {"list": [canon(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": [[canon(k), canon(x)] for k, x in v.items()]}
    if isinstance(v, (set, frozenset)):
        return {"set": [canon(x) for x in v]}
    raise TypeError(type(v))

shared = [1, 2, 3]
values = [
    None, True, False, 0, 1, -1, 255, 256, 65535, 65536, -129, 2**31 - 1, -2**31, 2**31, 2**63 - 1, -2**63,
    2**64, -2**64 - 5, 10**40, -10**40, 0.0, -0.0, 1.5, 3.141592653589793, 1e308, float("inf"), float("-inf"),
    "", "a", "héllo wörld ✓", "x" * 300, b"", b"\x00\xff", b"z" * 300, bytearray(b"abc"),
    (), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), [], [1, "a", None], list(range(1200)),
    {}, {"a": 1, "b": [2, 3]}, {1: "one", (2, 3): "pair"}, set(), {1, 2, 3}, frozenset([4, 5]),
    [shared, shared, (shared,)], {"k": {"k": {"k": {"k": [()]}}}},
    {"weights": [[0.5] * 3] * 2, "step": 7, "name": "model"},
]
with open("cases.jsonl", "w") as f:
    for proto in (2, 3, 4, 5):
        for v in values:
            f.write(json.dumps({"protocol": proto, "pickle": pickle.dumps(v, protocol=proto).hex(), "want": canon(v)}) + "\n")
# Objects: an OrderedDict with state (torch's state_dict keeps _metadata
# there), a class by __reduce__, persistent IDs as torch.save writes them.
class Pid(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.kind, obj.key, "cpu", obj.n)
        return None
class Storage:
    def __init__(self, kind, key, n):
        self.kind, self.key, self.n = kind, key, n
def rebuild(*a):
    pass
rebuild.__module__, rebuild.__qualname__ = "torch._utils", "_rebuild_tensor_v2"
torch = sys.modules["torch"] = type(sys)("torch")
torch._utils = sys.modules["torch._utils"] = type(sys)("torch._utils")
torch._utils._rebuild_tensor_v2 = rebuild
class Tensorish:
    def __init__(self, s, off, shape, stride):
        self.a = (s, off, shape, stride)
    def __reduce__(self):
        return (rebuild, self.a + (False, collections.OrderedDict()))
import io
for proto in (2, 4):
    od = collections.OrderedDict([("w", Tensorish(Storage(collections.OrderedDict, "0", 6), 0, (2, 3), (3, 1))), ("b", 5)])
    od._metadata = {"": {"version": 1}}
    buf = io.BytesIO()
    Pid(buf, protocol=proto).dump(od)
    with open("object-p%d.pickle" % proto, "wb") as f:
        f.write(buf.getvalue())
