package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// The bench table's header and summary say only what the run measured:
// no n/a ratios without baselines, no read settings for a write-only run,
// and what the median of an even count is.
func TestBenchReportText(t *testing.T) {
	r := benchReport{Repeats: 2, TaskSize: 4 << 20, BounceSize: 16 << 20, ReadPolicy: "auto", PageCache: "not dropped", Memory: "host", SizeBytes: 1e9}
	r.add(benchCase{op: "write", path: "kvik host", memory: "host", threads: 4}, 1e9, []float64{1, 0.5}, nil, true)
	var out bytes.Buffer
	r.print(&out)
	text := out.String()
	for _, bad := range []string{"n/a", "read policy", "page cache"} {
		if strings.Contains(text, bad) {
			t.Errorf("write-only run without baselines shows %q:\n%s", bad, text)
		}
	}
	for _, want := range []string{"median of 2", "write: best kvik path kvik host with 4 threads, 1.50 GB/s\n", "writes include fsync"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	// The median of 1 and 2 GB/s is 1.5 GB/s, not the rate at the mean
	// time (1.33 GB/s).
	if got := r.Results[0].MedianGBs; math.Abs(got-1.5) > 1e-9 {
		t.Errorf("median GB/s of 1 and 2 GB/s = %v, want 1.5", got)
	}
}
