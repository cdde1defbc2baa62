package sched

// Middle returns the aligned middle [start, end) of the range
// [off, off+n) that Segments would read directly: the largest range whose
// ends are multiples of align. start == end when there is none.
func Middle(off int64, n int, align int) (start, end int64) {
	a := int64(align)
	if n <= 0 || a <= 0 {
		return off, off
	}
	// off <= start <= end <= off+n: nothing here can overflow.
	end = (off + int64(n)) / a * a
	if end <= off {
		return off, off
	}
	start = end - (end-off)/a*a
	if end <= start {
		return off, off
	}
	return start, end
}

// ResidencyRule tunes PlanByResidency. Both lengths count units of align
// bytes (pages).
type ResidencyRule struct {
	// MinDirect is the shortest run read with O_DIRECT: shorter cold runs
	// stay buffered, since small direct requests waste the drive.
	MinDirect int
	// MaxIsland is the longest resident run, between two cold runs, that
	// is read directly with them rather than splitting the request.
	MaxIsland int
}

// PlanByResidency plans a read of [off, off+n) from a page-cache residency
// map: resident[i] tells whether unit i of the aligned middle (see Middle)
// is in the page cache, and len(resident) must be the middle's length in
// units (otherwise the whole range is one buffered segment).
//
// Cold runs of at least rule.MinDirect units are read directly, after
// resident islands of at most rule.MaxIsland units between cold runs have
// been joined to them; everything else, and the unaligned head and tail,
// is buffered. Adjacent segments of the same kind are merged, so direct
// and buffered segments alternate. Like Segments, n == 0 gives none.
func PlanByResidency(off int64, n int, align int, resident []bool, rule ResidencyRule) []Segment {
	if n <= 0 {
		return nil
	}
	start, end := Middle(off, n, align)
	a := int64(align)
	if end == start || int64(len(resident)) != (end-start)/a {
		return []Segment{{Off: off, Len: n}}
	}
	direct := directUnits(resident, rule)
	var segs []Segment
	add := func(from, to int64, d bool) {
		if to <= from {
			return
		}
		if k := len(segs) - 1; k >= 0 && segs[k].Direct == d {
			segs[k].Len += int(to - from)
			return
		}
		segs = append(segs, Segment{Off: from, BufOff: int(from - off), Len: int(to - from), Direct: d})
	}
	add(off, start, false)
	for i := 0; i < len(direct); {
		j := i
		for j < len(direct) && direct[j] == direct[i] {
			j++
		}
		add(start+int64(i)*a, start+int64(j)*a, direct[i])
		i = j
	}
	add(end, off+int64(n), false)
	return segs
}

// directUnits marks the units to read directly under rule.
func directUnits(resident []bool, rule ResidencyRule) []bool {
	cold := make([]bool, len(resident))
	for i, r := range resident {
		cold[i] = !r
	}
	// Join short resident islands to the cold runs around them.
	for _, r := range runs(cold) {
		if !r.set && r.from > 0 && r.to < len(cold) && r.to-r.from <= rule.MaxIsland {
			for i := r.from; i < r.to; i++ {
				cold[i] = true
			}
		}
	}
	// Cold runs too short for a direct request stay buffered.
	for _, r := range runs(cold) {
		if r.set && r.to-r.from < max(rule.MinDirect, 1) {
			for i := r.from; i < r.to; i++ {
				cold[i] = false
			}
		}
	}
	return cold
}

// run is a maximal range [from, to) of equal values.
type run struct {
	from, to int
	set      bool
}

func runs(v []bool) []run {
	var rs []run
	for i := 0; i < len(v); {
		j := i
		for j < len(v) && v[j] == v[i] {
			j++
		}
		rs = append(rs, run{i, j, v[i]})
		i = j
	}
	return rs
}
