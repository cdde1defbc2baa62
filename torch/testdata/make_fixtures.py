"""Writes the .pt fixtures of package torch and expected.json, with
PyTorch (2.11 on the GPU machines): torch.save's zip format of state
dicts and checkpoints of every dtype, views, shared storages, and the
legacy format (before PyTorch 1.6) of a small file and of the state
dict (its dtypes that have a legacy storage), views and checkpoint
again (legacy_*.pt), and a whole module saved (module.pt) and scripted
(scripted.pt, torch.jit.save). Run in this folder: python3
make_fixtures.py.
expected.json holds, per file and tensor, what torch.load gives: dtype,
shape, stride, storage offset and key, whether contiguous, and the
SHA-256 of the tensor's bytes in C order."""
import argparse, collections, hashlib, io, json, os, sys
import torch

torch.manual_seed(7)
g = torch.Generator().manual_seed(11)

def rand(shape, dtype):
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point or dtype.is_complex:
        return (torch.randn(shape, generator=g) * 3).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -1000), min(info.max, 1000) + 1, shape, generator=g).to(dtype)

def c_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()

dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
          torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128]
for name in ("float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64"):
    if hasattr(torch, name):
        dtypes.append(getattr(torch, name))

files = {}
# A model's state dict (an OrderedDict with _metadata), every dtype.
sd = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)).state_dict()
for dt in dtypes:
    n = str(dt).replace("torch.", "")
    try:
        sd["t_" + n] = rand((2, 3, 4), dt) if not n.startswith("float8") else rand((2, 3, 4), torch.float32).to(dt)
    except Exception as e:
        print("skip", n, e, file=sys.stderr)
files["state_dict.pt"] = sd
# Views and shared storages: tied weights, a slice with an offset, a
# transposed (non-contiguous) view, a 0-d tensor, an empty one.
base = rand((6, 8), torch.float32)
files["views.pt"] = {
    "emb": base, "lm_head": base, "tail": base[2:], "row": base[3], "t": base.t(), "every_other": base[:, ::2],
    "scalar": torch.tensor(3.5), "empty": torch.zeros((0, 4)), "big": rand((300, 257), torch.float16),
}
# A training checkpoint: nested dicts, lists, an optimizer's state with
# its step tensors, a Parameter, objects that are not tensors.
model = torch.nn.Linear(4, 3)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
model(torch.randn(2, 4)).sum().backward()
opt.step()
files["checkpoint.pt"] = {
    "model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3, "loss": 0.25,
    "args": argparse.Namespace(lr=0.01, name="run"), "history": [torch.arange(5), (torch.ones(2), "x")],
    "param": torch.nn.Parameter(rand((3,), torch.float32)), 7: torch.full((2,), 7, dtype=torch.int32),
}
if torch.cuda.is_available():
    files["cuda.pt"] = {"w": rand((64, 33), torch.float32).cuda(), "h": rand((17,), torch.bfloat16).cuda()}

# The legacy format: a small file, and the others again.
def legacy_ok(v):
    try:
        b = io.BytesIO()
        torch.save(v, b, _use_new_zipfile_serialization=False)
        b.seek(0)
        torch.load(b, weights_only=True)  # some dtypes save but do not load
        return True
    except Exception as e:
        print("legacy: skip", v.dtype, e, file=sys.stderr)
        return False

legacy = {"legacy.pt": {"w": torch.ones(3)}}
# Whole modules: torch.save of an nn.Module itself (the object pickled,
# its tensors in its attributes) and torch.jit.save of it scripted; what
# torch.load gives of them, as tensors, is their state dicts.
net = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
net(torch.randn(3, 6, generator=g))  # the running statistics move
net.eval()
modules = {"module.pt": net, "scripted.pt": net}
for name in ("state_dict.pt", "views.pt", "checkpoint.pt"):
    obj = files[name]
    if name == "state_dict.pt":
        obj = collections.OrderedDict((k, v) for k, v in obj.items() if legacy_ok(v))
    legacy["legacy_" + name] = obj

expected = {}
for fname, obj in list(files.items()) + list(legacy.items()) + list(modules.items()):
    if fname == "scripted.pt":
        torch.jit.save(torch.jit.script(obj), fname)
        loaded = torch.jit.load(fname, map_location="cpu").state_dict()
    else:
        torch.save(obj, fname, _use_new_zipfile_serialization=fname not in legacy)
        loaded = torch.load(fname, map_location="cpu", weights_only=False)
    if isinstance(loaded, torch.nn.Module):
        loaded = loaded.state_dict()
    ts = {}
    def walk(prefix, v):
        if isinstance(v, torch.Tensor):
            ts[prefix] = {
                "dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape), "stride": list(v.stride()),
                "storage_offset": v.storage_offset(), "contiguous": v.is_contiguous(),
                "sha256": hashlib.sha256(c_bytes(v)).hexdigest(),
            }
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(prefix + "." + str(k) if prefix else str(k), x)
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                walk(prefix + "." + str(i) if prefix else str(i), x)
    walk("", loaded)
    expected[fname] = ts
with open("expected.json", "w") as f:
    json.dump({"torch": torch.__version__, "files": expected}, f, indent=1, sort_keys=True)
print("torch", torch.__version__, "files", sorted(expected), "tensors", sum(len(v) for v in expected.values()))
