package zarr

// box is a hyper-rectangle: start and count per dimension.
type box struct {
	start, count []int
}

// view is an n-dimensional C-order buffer of es-byte elements with a
// position in it.
type view struct {
	buf   []byte
	shape []int
	es    int
	start []int
}

// sub returns v moved by off.
func (v view) sub(off []int) view {
	s := make([]int, len(off))
	for i := range off {
		s[i] = off[i]
		if v.start != nil {
			s[i] += v.start[i]
		}
	}
	return view{buf: v.buf, shape: v.shape, es: v.es, start: s}
}

func (v view) offset() int {
	off := 0
	for i := range v.shape {
		off = off*v.shape[i] + v.start[i]
	}
	return off * v.es
}

// runs calls f(byteOffset, length) for each contiguous run of count
// elements from v's position, merging trailing dimensions that are whole.
func (v view) runs(count []int, f func(off, n int) error) error {
	nd := len(count)
	if nd == 0 {
		return f(0, v.es)
	}
	if numElements(count) == 0 {
		return nil
	}
	k, run := v.merged(count)
	strides := cStrides(v.shape)
	idx := make([]int, k)
	base := v.offset()
	for {
		off := 0
		for d := 0; d < k; d++ {
			off += idx[d] * strides[d]
		}
		if err := f(base+off*v.es, run*v.es); err != nil {
			return err
		}
		d := k - 1
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < count[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return nil
		}
	}
}

// merged returns how many leading dimensions of count the runs of v
// step through, k, and the elements in each run: the trailing dimensions
// that count covers whole are merged into the last one's runs.
func (v view) merged(count []int) (k, run int) {
	k = len(count) - 1
	run = count[k]
	for k > 0 && count[k] == v.shape[k] {
		k--
		run *= count[k]
	}
	return k, run
}

// numRuns returns how many runs v.runs(count, ...) calls its function with.
func (v view) numRuns(count []int) int {
	if len(count) == 0 {
		return 1
	}
	if numElements(count) == 0 {
		return 0
	}
	k, _ := v.merged(count)
	return numElements(count[:k])
}

// runList is a chunk's bytes in C order as runs of a larger buffer (its
// place in a region read or written), so that a codec can write or read
// them where they lie rather than through a copy.
type runList struct {
	buf  []byte
	runs []int // offset in buf and length of each run, in turn
	n    int   // bytes in all
}

// runsOf lists the runs of count elements from v's position.
func runsOf(v view, count []int) runList {
	// Sized up front: grown by append, a 512-row chunk's list was ten
	// allocations per chunk read or written.
	l := runList{buf: v.buf, runs: make([]int, 0, 2*v.numRuns(count))}
	v.runs(count, func(off, n int) error {
		l.runs = append(l.runs, off, n)
		l.n += n
		return nil
	})
	return l
}

// appendTo appends l's bytes to b.
func (l runList) appendTo(b []byte) []byte {
	for i := 0; i < len(l.runs); i += 2 {
		b = append(b, l.buf[l.runs[i]:l.runs[i]+l.runs[i+1]]...)
	}
	return b
}

// splits reports whether blocks of bs bytes (the last shorter) and l's
// runs all hold whole elements of ts bytes.
func (l runList) splits(bs, ts int) bool {
	if bs%ts != 0 {
		return false
	}
	for i := 1; i < len(l.runs); i += 2 {
		if l.runs[i]%ts != 0 {
			return false
		}
	}
	return true
}

// runCursor is a position in a runList: run index (pairs) and offset in
// it, for reading its bytes in order. With ahead set, each run begun has
// the start of the run prefetchAhead runs on prefetched.
type runCursor struct {
	run, off int
	ahead    bool
}

// A Blosc write gathers a chunk from the region's rows, one run per row:
// 512 bytes apart by a row's stride for a 128 x 128 float32 chunk, which
// the hardware's prefetchers do not see coming. Prefetching 4 runs ahead
// raised writes of such chunks from 0.50-0.55 to 0.60 of their encode
// ceiling on the H200 (1 MiB chunks, runs of 2 KiB: no change).
const prefetchAhead, prefetchMax = 4, 4096

// next calls f with the pieces of the next n bytes of l, each with its
// offset from the first of them, and moves past them.
func (c *runCursor) next(l runList, n int, f func(off int, part []byte)) {
	for done := 0; done < n; {
		start, size := l.runs[c.run], l.runs[c.run+1]
		if c.ahead && c.off == 0 {
			if r := c.run + 2*prefetchAhead; r+1 < len(l.runs) && l.runs[r+1] > 0 {
				prefetchLines(&l.buf[l.runs[r]], min(l.runs[r+1], prefetchMax))
			}
		}
		m := min(n-done, size-c.off)
		f(done, l.buf[start+c.off:start+c.off+m])
		done += m
		if c.off += m; c.off == size {
			c.run, c.off = c.run+2, 0
		}
	}
}

// copyBox copies count elements from src's position to dst's.
func copyBox(dst, src view, count []int) {
	if len(count) == 0 {
		copy(dst.buf[:dst.es], src.buf[:src.es])
		return
	}
	if count[len(count)-1]*src.es == 0 {
		return
	}
	pairRuns(dst, src, count, func(d, s, m int) error {
		copy(dst.buf[d:d+m], src.buf[s:s+m])
		return nil
	})
}

// pairRuns walks the box count of a and of b together and calls f with
// the offsets in a and in b of each stretch that is contiguous in both.
// Runs of the two sides differ in length when their shapes differ, so a
// run of one side may span several of the other.
func pairRuns(a, b view, count []int, f func(aOff, bOff, n int) error) error {
	type run struct{ off, n int }
	var br []run
	b.runs(count, func(off, n int) error { br = append(br, run{off, n}); return nil })
	bi, bo := 0, 0
	return a.runs(count, func(off, n int) error {
		for n > 0 {
			r := br[bi]
			m := min(n, r.n-bo)
			if err := f(off, r.off+bo, m); err != nil {
				return err
			}
			off += m
			n -= m
			bo += m
			if bo == r.n {
				bi, bo = bi+1, 0
			}
		}
		return nil
	})
}

// fill writes count copies of the element e from v's position.
func (v view) fill(count []int, e []byte) {
	v.runs(count, func(off, n int) error {
		fillRepeat(v.buf[off:off+n], e)
		return nil
	})
}

// chunkRange returns the first and the last chunk indices that region r
// (not empty) touches in each dimension.
func chunkRange(chunks, gridShape []int, r box) (lo, hi []int) {
	lo, hi = make([]int, len(chunks)), make([]int, len(chunks))
	for d := range chunks {
		lo[d] = r.start[d] / chunks[d]
		hi[d] = min((r.start[d]+r.count[d]-1)/chunks[d], gridShape[d]-1)
	}
	return lo, hi
}

// chunksIn returns how many chunks forChunks visits for region r.
func chunksIn(chunks, gridShape []int, r box) int {
	if numElements(r.count) == 0 {
		return 0
	}
	lo, hi := chunkRange(chunks, gridShape, r)
	n := 1
	for d := range lo {
		n *= hi[d] - lo[d] + 1
	}
	return n
}

// chunkTask is the part of one chunk that a region needs.
type chunkTask struct {
	coords   []int // chunk indices
	sel      box   // in chunk coordinates
	dstStart []int // where sel starts in the region
}

// forChunks calls f for each chunk of a grid of chunk shape chunks
// (gridShape chunks per dimension) that region r touches, in C order.
func forChunks(chunks, gridShape []int, r box, f func(chunkTask) error) error {
	nd := len(chunks)
	if numElements(r.count) == 0 {
		return nil
	}
	lo, hi := chunkRange(chunks, gridShape, r)
	c := append([]int(nil), lo...)
	for {
		// One allocation for the task's four vectors: a region's plan
		// makes one task per chunk.
		v := make([]int, 4*nd)
		copy(v, c)
		t := chunkTask{coords: v[:nd:nd], sel: box{v[nd : 2*nd : 2*nd], v[2*nd : 3*nd : 3*nd]}, dstStart: v[3*nd:]}
		for d := 0; d < nd; d++ {
			origin := c[d] * chunks[d]
			s := max(r.start[d], origin)
			e := min(r.start[d]+r.count[d], origin+chunks[d])
			t.sel.start[d] = s - origin
			t.sel.count[d] = e - s
			t.dstStart[d] = s - r.start[d]
		}
		if err := f(t); err != nil {
			return err
		}
		d := nd - 1
		for ; d >= 0; d-- {
			c[d]++
			if c[d] <= hi[d] {
				break
			}
			c[d] = lo[d]
		}
		if d < 0 {
			return nil
		}
	}
}

func flatIndex(c, shape []int) int {
	i := 0
	for d := range shape {
		i = i*shape[d] + c[d]
	}
	return i
}

func unflatten(i int, shape, out []int) {
	for d := len(shape) - 1; d >= 0; d-- {
		out[d] = i % shape[d]
		i /= shape[d]
	}
}
