package sched

import (
	"math"
	"testing"
)

// The fuzz targets keep offsets below 1<<50; these tests cover the top of
// the int64 range, where FileHandle accepts any off with off+size <=
// math.MaxInt64.

func TestSplitNearMaxInt64(t *testing.T) {
	for _, c := range []struct {
		off            int64
		size, taskSize int
	}{
		{math.MaxInt64, 0, 4096},
		{math.MaxInt64 - 1, 1, 4096},
		{math.MaxInt64 - 10000, 10000, 4096},
		{math.MaxInt64 - 10000, 10000, 1},
		{math.MaxInt64 - (1 << 20), 1 << 20, 0},
	} {
		checkSplit(t, c.off, c.size, c.taskSize)
		checkSplitAligned(t, c.off, c.size, c.taskSize, 512)
		checkSplitAligned(t, c.off, c.size, c.taskSize, 4096)
		for _, tk := range Split(c.off, c.size, c.taskSize) {
			if tk.Off < c.off || tk.Off > math.MaxInt64-int64(tk.Len) {
				t.Fatalf("Split(%d, %d, %d): task %+v leaves the range", c.off, c.size, c.taskSize, tk)
			}
		}
	}
}

func TestSegmentsNearMaxInt64(t *testing.T) {
	for _, align := range []int{512, 4096, 1 << 20} {
		a := int64(align)
		for _, off := range []int64{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - 10, math.MaxInt64 - a + 2, math.MaxInt64 - a + 1, math.MaxInt64 - a, math.MaxInt64 - 3*a - 7} {
			for _, n := range []int{0, 1, 10, align, 2*align + 3, 3 * align} {
				if int64(n) > math.MaxInt64-off {
					continue
				}
				checkSegments(t, off, n, align, true)
				for _, s := range Segments(off, n, align, true) {
					if s.Off < off || s.Len < 0 || s.Off > math.MaxInt64-int64(s.Len) {
						t.Fatalf("Segments(%d, %d, %d, true): segment %+v leaves the range", off, n, align, s)
					}
				}
			}
		}
	}
}
