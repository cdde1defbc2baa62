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
lo, hi = float(sys.argv[2])*1e6+t0, float(sys.argv[3])*1e6+t0
state = {}  # g -> (since, state, stack)
acc = collections.Counter()
def add(g, t):
    if g in state:
        s0, st, stack = state[g]
        ov = min(t, hi) - max(s0, lo)
        if ov > 0:
            key = st
            if st == "Syscall":
                frames = [f for f in stack if "runtime." not in f and "syscall." not in f.split("/")[-1][:8]]
                key = "Syscall " + (stack[0] if stack else "?")
                for f in stack:
                    if "libzstd" in f: key = "Syscall libzstd"; break
                    if "cuda." in f: key = "Syscall cuda"; break
                    if "poll.(*FD).Read" in f: key = "Syscall read"; break
                    if "poll.(*FD).Write" in f: key = "Syscall write"; break
            acc[key] += ov
for t, g, a, b, st in events:
    add(g, t)
    state[g] = (t, b, st)
for g in list(state): add(g, hi)
tot = (hi-lo)
for k, v in acc.most_common(12):
    print("%-40s %8.1f ms  %5.2f goroutines" % (k[:40], v/1e6, v/tot))
