import re, sys, collections
ev = re.compile(r"^M=(-?\d+) P=(-?\d+) G=(-?\d+) StateTransition Time=(\d+) GoID=(\d+) (\w+)->(\w+)")
events = []
cur = None
for line in open(sys.argv[1]):
    m = ev.match(line)
    if m:
        if cur: events.append(cur)
        cur = [int(m.group(4)), int(m.group(5)), m.group(6), m.group(7), []]
    elif cur is not None and line.startswith("\t") and not line.startswith("\t\t"):
        cur[4].append(line.strip().split(" @")[0])
if cur: events.append(cur)
t0 = events[0][0]
open_ = {}
spans = []  # (start, end, kind)
for t, g, a, b, st in events:
    if b == "Syscall" and any("libzstd.Decompress" in s for s in st):
        kind = "ceil" if any("DecodeChunk" in s for s in st) else "read"
        open_[g] = (t, kind)
    elif a == "Syscall" and g in open_:
        s0, k = open_.pop(g)
        spans.append((s0, t, k))
lo, hi, bin_ = float(sys.argv[2])*1e6+t0, float(sys.argv[3])*1e6+t0, 5e6
nb = int((hi-lo)/bin_)
busy = [0.0]*nb
for s, e, k in spans:
    if k != "read": continue
    for i in range(nb):
        b0, b1 = lo+i*bin_, lo+(i+1)*bin_
        ov = min(e, b1) - max(s, b0)
        if ov > 0: busy[i] += ov
print("cores decoding per 5 ms from %s ms:" % sys.argv[2], " ".join("%.1f" % (x/bin_) for x in busy))
tot = sum(busy)/ (hi-lo)
print("mean cores decoding %.2f over %.0f ms" % (tot, (hi-lo)/1e6))
