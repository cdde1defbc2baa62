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
	// Merge trailing dimensions that count covers whole.
	k := nd - 1
	run := count[k]
	for k > 0 && count[k] == v.shape[k] {
		k--
		run *= count[k]
	}
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

// copyBox copies count elements from src's position to dst's.
func copyBox(dst, src view, count []int) {
	if len(count) == 0 {
		copy(dst.buf[:dst.es], src.buf[:src.es])
		return
	}
	type run struct{ off, n int }
	var sr []run
	src.runs(count, func(off, n int) error { sr = append(sr, run{off, n}); return nil })
	// Runs of the two sides differ in length when their shapes differ;
	// walk both in row units.
	row := count[len(count)-1] * src.es
	if row == 0 {
		return
	}
	si, so := 0, 0
	dst.runs(count, func(off, n int) error {
		for n > 0 {
			r := sr[si]
			m := min(n, r.n-so)
			// Both sides are whole rows; m is a multiple of row.
			copy(dst.buf[off:off+m], src.buf[r.off+so:r.off+so+m])
			off += m
			n -= m
			so += m
			if so == r.n {
				si, so = si+1, 0
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
	lo := make([]int, nd)
	hi := make([]int, nd)
	for d := 0; d < nd; d++ {
		lo[d] = r.start[d] / chunks[d]
		hi[d] = min((r.start[d]+r.count[d]-1)/chunks[d], gridShape[d]-1)
	}
	c := append([]int(nil), lo...)
	for {
		t := chunkTask{coords: append([]int(nil), c...), sel: box{make([]int, nd), make([]int, nd)}, dstStart: make([]int, nd)}
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
