package zarr

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRunsOf lists the runs of random boxes of random 1-4 dimensional
// buffers and checks them against the box's elements walked one by one
// (each run a stretch of consecutive offsets, the runs in C order, as
// long as they can be), and that the list was sized once: numRuns is
// exact and runsOf allocates only its list.
func TestRunsOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for range 500 {
		nd := 1 + rng.IntN(4)
		shape, start, count := make([]int, nd), make([]int, nd), make([]int, nd)
		for d := range nd {
			shape[d] = 1 + rng.IntN(7)
			if rng.IntN(3) == 0 { // whole dimensions, which merge
				count[d] = shape[d]
			} else {
				start[d] = rng.IntN(shape[d])
				count[d] = rng.IntN(shape[d] - start[d] + 1)
			}
		}
		es := 1 + rng.IntN(8)
		v := view{buf: make([]byte, numElements(shape)*es), shape: shape, es: es, start: start}
		var want [][2]int // offset, length of each maximal run in order
		strides := cStrides(shape)
		idx := make([]int, nd)
		for i := range numElements(count) {
			r := i
			off := 0
			for d := nd - 1; d >= 0; d-- {
				idx[d] = r % count[d]
				r /= count[d]
			}
			for d := range nd {
				off += (start[d] + idx[d]) * strides[d]
			}
			if n := len(want); n > 0 && want[n-1][0]+want[n-1][1] == off*es {
				want[n-1][1] += es
				continue
			}
			want = append(want, [2]int{off * es, es})
		}
		l := runsOf(v, count)
		var got [][2]int
		for i := 0; i < len(l.runs); i += 2 {
			got = append(got, [2]int{l.runs[i], l.runs[i+1]})
		}
		if !slices.Equal(got, want) {
			t.Fatalf("shape %v start %v count %v: runs %v, want %v", shape, start, count, got, want)
		}
		if n := v.numRuns(count); n != len(got) || cap(l.runs) != 2*n {
			t.Fatalf("shape %v count %v: numRuns %d, cap %d, for %d runs", shape, count, n, cap(l.runs), len(got))
		}
		if a := testing.AllocsPerRun(5, func() { runsOf(v, count) }); len(got) > 0 && a > 1 {
			t.Fatalf("shape %v count %v: runsOf made %.0f allocations, want 1", shape, count, a)
		}
	}
}
