#!/usr/bin/env python3
"""Where one read of an execution trace spends its goroutines' time, for
call 10 of the nineteenth session (README.md): from the output of
`go tool trace -d=parsed TRACE > parsed.txt`,

    python3 phases.py parsed.txt FROM_MS TO_MS

prints, for the window [FROM_MS, TO_MS) of the trace, the goroutines'
time by state (a system call named by what made it: libzstd, cuda, a
network read or write) and how many goroutines were inside libzstd
decoding a read's chunks per 5 ms (the decode ceiling's, under
DecodeChunk, left out). Events come from bench/trace_workers.py's read.
"""
import collections
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from trace_workers import read  # noqa: E402


def syscall_key(stack):
    for f in stack:
        if "libzstd" in f:
            return "Syscall libzstd"
        if "cuda." in f:
            return "Syscall cuda"
        if "poll.(*FD).Read" in f:
            return "Syscall read"
        if "poll.(*FD).Write" in f:
            return "Syscall write"
    return "Syscall " + (stack[0] if stack else "?")


def main(path, lo_ms, hi_ms, bin_ns=5e6):
    events = read(path, depth=None)
    t0 = events[0][0]
    lo, hi = lo_ms * 1e6 + t0, hi_ms * 1e6 + t0
    # The goroutines' time by state within the window.
    state, acc = {}, collections.Counter()
    def add(g, t):
        if g in state:
            s0, st, stack = state[g]
            ov = min(t, hi) - max(s0, lo)
            if ov > 0:
                acc[syscall_key(stack) if st == "Syscall" else st] += ov
    for t, g, _, b, st in events:
        add(g, t)
        state[g] = (t, b, st)
    for g in list(state):
        add(g, hi)
    for k, v in acc.most_common(12):
        print("%-40s %8.1f ms  %5.2f goroutines" % (k[:40], v / 1e6, v / (hi - lo)))
    # Goroutines inside libzstd for a read (not a ceiling's DecodeChunk).
    open_, busy = {}, [0.0] * int((hi - lo) / bin_ns)
    for t, g, a, b, st in events:
        if b == "Syscall" and any("libzstd.Decompress" in f for f in st):
            open_[g] = (t, any("DecodeChunk" in f for f in st))
        elif a == "Syscall" and g in open_:
            s0, ceiling = open_.pop(g)
            for i in range(len(busy)) if not ceiling else ():
                ov = min(t, lo + (i + 1) * bin_ns) - max(s0, lo + i * bin_ns)
                if ov > 0:
                    busy[i] += ov
    print("cores decoding per 5 ms from %g ms:" % lo_ms, " ".join("%.1f" % (x / bin_ns) for x in busy))
    print("mean cores decoding %.2f over %.0f ms" % (sum(busy) / (hi - lo), (hi - lo) / 1e6))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], float(sys.argv[2]), float(sys.argv[3]))
