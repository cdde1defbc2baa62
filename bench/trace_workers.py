#!/usr/bin/env python3
"""Where the workers of kvik's loads spend their time, from an execution
trace (go test -trace, or kvik bench --trace) printed by
`go tool trace -d=parsed TRACE > parsed.txt`:

    python3 bench/trace_workers.py parsed.txt

Busy periods (system calls no more than 50 ms apart) longer than 50 ms are
taken as loads. For each it prints the goroutines' time by state (a
system call named by what made it: pread, or the CUDA call through
purego), the goroutine state changes that led to the most time Runnable
(waiting for a processor), and, per 5 ms, how many goroutines were in a
pread and how many running, in a system call or runnable: the start (header,
allocation) and the tail of a load show there.
"""
import collections
import re
import sys

EVENT = re.compile(r"^M=(-?\d+) P=(-?\d+) G=(-?\d+) StateTransition Time=(\d+) GoID=(\d+) (\w+)->(\w+)")


def read(path, depth=6):
    """Goroutine state changes: (time ns, goroutine, from, to, top frames),
    at most depth frames (None: all)."""
    events, cur = [], None
    with open(path) as f:
        for line in f:
            if line.startswith("M="):
                if cur:
                    events.append(cur)
                m = EVENT.match(line)
                cur = [int(m.group(4)), int(m.group(5)), m.group(6), m.group(7), []] if m else None
            elif cur is not None and line.startswith("\t") and not line.startswith("\t\t") and (depth is None or len(cur[4]) < depth):
                cur[4].append(line.strip().split(" @")[0])
    if cur:
        events.append(cur)
    return events


def syscall_kind(frames):
    s = " ".join(frames)
    if "unix.pread" in s or "unix.Pread" in s:
        return "pread"
    cuda = next((x for x in frames if "/cuda." in x or "/devmem." in x), None)
    return "cgo " + (cuda or (frames[0] if frames else "?")).split("/")[-1]


def loads(events, gap=50e6, longer=50e6):
    times = sorted(e[0] for e in events if e[3] == "Syscall")
    spans, start, last = [], times[0], times[0]
    for t in times[1:]:
        if t - last > gap:
            spans.append((start, last))
            start = t
        last = t
    spans.append((start, last))
    return [s for s in spans if s[1] - s[0] > longer]


def report(events, a, b, t0, bin_ns=5e6):
    state, time_in, why = {}, collections.Counter(), collections.Counter()
    preads, active = [], []
    for t, g, frm, to, frames in events:
        if t < a - 2e6 or t > b + 2e6:
            continue
        if g in state:
            s, since, kind, cause = state[g]
            time_in[(s, kind)] += t - since
            if s == "Runnable":
                why[cause] += t - since
            if s == "Syscall" and kind == "pread":
                preads.append((since, t))
            if s in ("Running", "Syscall", "Runnable"):
                active.append((since, t))
        kind = syscall_kind(frames) if to == "Syscall" else ""
        cause = frm + ": " + " < ".join(x.split("/")[-1] for x in frames[:3]) if to == "Runnable" else ""
        state[g] = (to, t, kind, cause)
    total = sum(time_in.values()) or 1
    print(f"load at {(a - t0) / 1e6:.1f} ms, {(b - a) / 1e6:.1f} ms long, {len(state)} goroutines")
    for (s, kind), v in time_in.most_common(10):
        print(f"  {s:9s} {kind:45s} {v / 1e6:8.1f} ms {100 * v / total:5.1f}%")
    for cause, v in why.most_common(3):
        print(f"  runnable after {cause[:90]:90s} {v / 1e6:7.1f} ms")
    n = int((b - a) // bin_ns) + 1
    for name, spans in (("in pread", preads), ("active", active)):
        occ = [0.0] * n
        for x, y in spans:
            x, y = max(x, a), min(y, b)
            while x < y:
                i = min(int((x - a) // bin_ns), n - 1)
                e = min(y, a + (i + 1) * bin_ns)
                occ[i] += e - x
                x = e
        print(f"  {name:8s} per 5 ms: " + " ".join(f"{o / bin_ns:.0f}" for o in occ))


def main():
    events = read(sys.argv[1])
    t0 = events[0][0]
    for a, b in loads(events):
        report(events, a, b, t0)


if __name__ == "__main__":
    main()
