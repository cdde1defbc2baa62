package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestMiddleMatchesSegments(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		align := 1 << rng.IntN(13)
		off := rng.Int64N(1 << 20)
		n := rng.IntN(1 << 16)
		start, end := Middle(off, n, align)
		var dStart, dEnd int64
		for _, s := range Segments(off, n, align, true) {
			if s.Direct {
				dStart, dEnd = s.Off, s.Off+int64(s.Len)
			}
		}
		if dEnd == 0 {
			dStart, dEnd = start, start // no direct segment
		}
		if (start != end || dStart != dEnd) && (start != dStart || end != dEnd) {
			t.Fatalf("Middle(%d, %d, %d) = [%d, %d), Segments' direct part [%d, %d)", off, n, align, start, end, dStart, dEnd)
		}
	}
}

// checkResidencyPlan checks the rules of PlanByResidency for one map.
func checkResidencyPlan(t *testing.T, off int64, n, align int, resident []bool, rule ResidencyRule) {
	t.Helper()
	segs := PlanByResidency(off, n, align, resident, rule)
	desc := func() string {
		return fmt.Sprintf("PlanByResidency(off %d, n %d, align %d, %s, %+v) = %+v", off, n, align, mapString(resident), rule, segs)
	}
	a := int64(align)
	start, _ := Middle(off, n, align)
	// The segments tile [off, off+n) in order and alternate in kind.
	pos := off
	for i, s := range segs {
		if s.Off != pos || s.BufOff != int(s.Off-off) || s.Len <= 0 {
			t.Fatalf("%s: segment %d does not continue at %d", desc(), i, pos)
		}
		if i > 0 && segs[i-1].Direct == s.Direct {
			t.Fatalf("%s: segments %d and %d are both direct=%v", desc(), i-1, i, s.Direct)
		}
		if s.Direct && (s.Off%a != 0 || int64(s.Len)%a != 0 || s.Len < max(rule.MinDirect, 1)*align) {
			t.Fatalf("%s: direct segment %d is unaligned or shorter than %d units", desc(), i, rule.MinDirect)
		}
		pos += int64(s.Len)
	}
	if pos != off+int64(n) {
		t.Fatalf("%s: covers up to %d, want %d", desc(), pos, off+int64(n))
	}
	direct := make([]bool, len(resident))
	for _, s := range segs {
		if s.Direct {
			for u := (s.Off - start) / a; u < (s.Off-start+int64(s.Len))/a; u++ {
				direct[u] = true
			}
		}
	}
	// Every cold run long enough for a request is read directly.
	for _, r := range runs(resident) {
		if !r.set && r.to-r.from >= max(rule.MinDirect, 1) {
			for u := r.from; u < r.to; u++ {
				if !direct[u] {
					t.Fatalf("%s: unit %d lies in a cold run of %d units but is buffered", desc(), u, r.to-r.from)
				}
			}
		}
	}
	// A resident unit read directly lies in a short island between cold
	// units that are read directly too.
	for _, r := range runs(resident) {
		if !r.set || !direct[r.from] {
			continue
		}
		if r.to-r.from > rule.MaxIsland || r.from == 0 || r.to == len(resident) || !direct[r.from-1] || !direct[r.to] {
			t.Fatalf("%s: resident run [%d, %d) is read directly", desc(), r.from, r.to)
		}
	}
}

func mapString(resident []bool) string {
	b := make([]byte, len(resident))
	for i, r := range resident {
		b[i] = "cR"[btoi(r)]
	}
	return string(b)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestPlanByResidencyExhaustive checks every map of up to 12 units under
// several rules and alignments of the range.
func TestPlanByResidencyExhaustive(t *testing.T) {
	const align = 8
	rules := []ResidencyRule{{0, 0}, {1, 0}, {2, 1}, {3, 2}, {4, 1}, {13, 3}}
	for units := 0; units <= 12; units++ {
		for mask := range 1 << units {
			resident := make([]bool, units)
			for i := range resident {
				resident[i] = mask>>i&1 != 0
			}
			for _, rule := range rules {
				for _, head := range []int{0, 3} {
					for _, tail := range []int{0, 5} {
						off := int64(align*7 - head)
						n := head + units*align + tail
						if units == 0 && head+tail == 0 {
							continue
						}
						if head > 0 && units == 0 {
							continue // no middle: not a map of zero units
						}
						checkResidencyPlan(t, off, n, align, resident, rule)
					}
				}
			}
		}
	}
}

func TestPlanByResidencyRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		align := 1 << (2 + rng.IntN(11))
		off := rng.Int64N(1 << 30)
		n := rng.IntN(300*align) + 1
		start, end := Middle(off, n, align)
		units := int((end - start) / int64(align))
		resident := make([]bool, units)
		// Runs of random length, as a page cache has.
		for i := 0; i < units; {
			l := 1 + rng.IntN(40)
			v := rng.IntN(2) == 0
			for ; l > 0 && i < units; l, i = l-1, i+1 {
				resident[i] = v
			}
		}
		rule := ResidencyRule{MinDirect: rng.IntN(20), MaxIsland: rng.IntN(8)}
		checkResidencyPlan(t, off, n, align, resident, rule)
	}
}

func TestPlanByResidencyCases(t *testing.T) {
	rule := ResidencyRule{MinDirect: 3, MaxIsland: 1}
	for _, c := range []struct {
		m    string
		want string // kind of each unit: D direct, b buffered
	}{
		{"cccc", "DDDD"},
		{"RRRR", "bbbb"},
		{"ccRcc", "DDDDD"},       // island of 1 joins
		{"ccRRcc", "bbbbbb"},     // island of 2 does not; runs of 2 too short
		{"cccRRccc", "DDDbbDDD"}, // two long runs
		{"Rccc", "bDDD"},
		{"cRcc", "DDDD"},
		{"ccR", "bbb"}, // an island at the end is not between cold runs
	} {
		resident := make([]bool, len(c.m))
		for i := range c.m {
			resident[i] = c.m[i] == 'R'
		}
		segs := PlanByResidency(0, len(c.m), 1, resident, rule)
		got := make([]byte, 0, len(c.m))
		for _, s := range segs {
			for range s.Len {
				got = append(got, "bD"[btoi(s.Direct)])
			}
		}
		if string(got) != c.want {
			t.Errorf("%s: got %s, want %s (%+v)", c.m, got, c.want, segs)
		}
	}
	// A map of the wrong length gives one buffered segment.
	if segs := PlanByResidency(0, 4096*4, 4096, make([]bool, 3), rule); len(segs) != 1 || segs[0].Direct || segs[0].Len != 4096*4 {
		t.Errorf("wrong-length map: %+v", segs)
	}
	if segs := PlanByResidency(5, 0, 4096, nil, rule); segs != nil {
		t.Errorf("n = 0: %+v", segs)
	}
}
