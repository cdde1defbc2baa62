package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvikgo/kvik/internal/benchplot"
	"github.com/kvikgo/kvik/internal/formatkit/tensorload"
)

// gpusFlag is kvik bench's --gpus: the GPUs of a model load's curve, in
// order. The zero value is every visible GPU.
type gpusFlag struct {
	count int   // --gpus N: the first N visible GPUs
	list  []int // --gpus A,B,...: these ordinals
}

func (g *gpusFlag) String() string {
	switch {
	case g.count > 0:
		return strconv.Itoa(g.count)
	case g.list != nil:
		return joinInts(g.list, ",")
	}
	return "all"
}

// Set parses a count ("3": GPUs 0, 1 and 2), a comma-separated list of
// ordinals ("0,2,3", "2,": GPU 2 alone) or "all".
func (g *gpusFlag) Set(s string) error {
	*g = gpusFlag{}
	s = strings.TrimSpace(s)
	if s == "all" {
		return nil
	}
	if !strings.Contains(s, ",") {
		n, err := strconv.Atoi(s)
		switch {
		case err != nil:
			return fmt.Errorf("want a GPU count, a comma-separated list of GPU ordinals or all")
		case n < 1:
			return fmt.Errorf("a count of GPUs must be at least 1 (one GPU by its ordinal: --gpus %d,)", n)
		}
		g.count = n
		return nil
	}
	for f := range strings.SplitSeq(strings.TrimSuffix(s, ","), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		switch {
		case err != nil || n < 0:
			return fmt.Errorf("%q is not a GPU ordinal", f)
		case slices.Contains(g.list, n):
			return fmt.Errorf("GPU %d is listed twice", n)
		}
		g.list = append(g.list, n)
	}
	return nil
}

// resolve returns the GPUs of the curve on a machine with n visible GPUs.
func (g gpusFlag) resolve(n int) ([]int, error) {
	switch {
	case g.count > n:
		return nil, usagef("--gpus %d: %s visible", g.count, count(n, "GPU"))
	case g.count > 0:
		n = g.count
	case g.list != nil:
		for _, d := range g.list {
			if d >= n {
				return nil, usagef("--gpus %s: no GPU %d (%s visible, 0 to %d)", g.String(), d, count(n, "GPU"), n-1)
			}
		}
		return g.list, nil
	}
	set := make([]int, n)
	for i := range set {
		set[i] = i
	}
	return set, nil
}

// shareFlag is kvik bench's --share K/N: load only the tensors that a
// balanced load over N GPUs puts on its K-th (counting from 0), onto
// GPU 0. One process per GPU, each loading its share, is the reference
// that one process loading onto N GPUs is measured against.
type shareFlag struct{ k, n int }

func (s *shareFlag) String() string {
	if s.n == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.k, s.n)
}

func (s *shareFlag) Set(v string) error {
	k, n, ok := strings.Cut(v, "/")
	a, errA := strconv.Atoi(k)
	b, errB := strconv.Atoi(n)
	if !ok || errA != nil || errB != nil || b < 1 || a < 0 || a >= b {
		return fmt.Errorf("want K/N with 0 <= K < N, such as 1/4")
	}
	*s = shareFlag{a, b}
	return nil
}

// shareOf returns which of a file's tensors, of the sizes given in
// order, make share s: those the balanced placement over s.n devices
// puts on device index s.k (tensorload.BalancedSlots), and their bytes.
func shareOf(sizes []int64, s shareFlag) (in []bool, bytes int64) {
	in = make([]bool, len(sizes))
	for i, slot := range tensorload.BalancedSlots(sizes, s.n) {
		if slot == s.k {
			in[i] = true
			bytes += sizes[i]
		}
	}
	return in, bytes
}

// modelConfig is one configuration of kvik bench --safetensors or
// --gguf; base is the whole file read into GPU 0's memory.
type modelConfig struct {
	name      string
	devs      []int // the load's devices; nil for the base
	replicate bool
	alloc     bool // only allocate the file's size, evenly over devs
}

// gpuNames names a set of GPUs as the rows do: gpu0+1+2.
func gpuNames(devs []int) string { return "gpu" + joinInts(devs, "+") }

func joinInts(xs []int, sep string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, sep)
}

// curveConfigs returns the configurations of the curve over set, after
// base: the load balanced over the first k GPUs of set for every k, and
// with several GPUs the replicated load onto all of them and the
// allocations alone (the fixed cost beside the reads: a load allocates
// its shares, one GPU after the other, and Close frees them).
func curveConfigs(kind, base string, set []int) []modelConfig {
	cs := []modelConfig{{name: base}}
	for k := 1; k <= len(set); k++ {
		c := modelConfig{name: kind + ".Load " + gpuNames(set[:k]), devs: set[:k]}
		if k > 1 {
			c.name += " balanced"
		}
		cs = append(cs, c)
	}
	if len(set) < 2 {
		return cs
	}
	return append(cs,
		modelConfig{name: kind + ".Load " + gpuNames(set) + " replicated", devs: set, replicate: true},
		modelConfig{name: "alloc only, " + gpuNames(set[:1]), devs: set[:1], alloc: true},
		modelConfig{name: "alloc only, " + gpuNames(set), devs: set, alloc: true})
}

// curvePoint is one row of the scaling table: the load balanced over
// the first GPUs of the set.
type curvePoint struct {
	gpus int
	r    stResult
}

// modelSummary is what kvik bench prints below the rows of a model's
// load: the curve, the processes' reference and the replicated load.
type modelSummary struct {
	curve      []curvePoint
	procs      *stResult // one process per GPU, in step; nil if not run
	replicated *stResult
	allocOne   *stResult
	allocAll   *stResult
}

// summarize picks the rows of results (in the order of curveConfigs'
// configurations, then procs) that the summary needs.
func summarize(cs []modelConfig, results []stResult, procs *stResult) modelSummary {
	s := modelSummary{procs: procs}
	for i, c := range cs {
		r := &results[i]
		switch {
		case c.devs == nil:
		case c.alloc && len(c.devs) == 1:
			s.allocOne = r
		case c.alloc:
			s.allocAll = r
		case c.replicate:
			s.replicated = r
		default:
			s.curve = append(s.curve, curvePoint{len(c.devs), *r})
		}
	}
	return s
}

// print writes the scaling table: each GPU count's load in GB/s, best
// (median), and against one GPU's; then the processes' reference, the
// replicated load, and the ratio without the allocations.
func (s modelSummary) print(w io.Writer, kind string) {
	if len(s.curve) < 2 {
		return
	}
	one := s.curve[0].r
	fmt.Fprintf(w, "  %s.Load balanced over the first N GPUs, one process; best (median):\n", kind)
	fmt.Fprintf(w, "  %4s  %16s  %15s\n", "GPUs", "GB/s", "x one GPU")
	for _, p := range s.curve {
		fmt.Fprintf(w, "  %4d  %7.2f (%6.2f)  %5.2fx (%5.2fx)\n", p.gpus, p.r.GBps, p.r.MedianGBps, p.r.GBps/one.GBps, p.r.MedianGBps/one.MedianGBps)
	}
	last := s.curve[len(s.curve)-1]
	if s.procs != nil {
		fmt.Fprintf(w, "  %d processes, each its share on its GPU, in step: %.2f (%.2f) GB/s, %.2fx (%.2fx) one GPU; one process / %d processes: %.2fx (%.2fx)\n",
			last.gpus, s.procs.GBps, s.procs.MedianGBps, s.procs.GBps/one.GBps, s.procs.MedianGBps/one.MedianGBps,
			last.gpus, last.r.GBps/s.procs.GBps, last.r.MedianGBps/s.procs.MedianGBps)
	}
	if r := s.replicated; r != nil {
		fmt.Fprintf(w, "  replicated on %d GPUs, time / one GPU's: %.2fx (%.2fx)\n", last.gpus, r.Best/one.Best, r.Median/one.Median)
	}
	if s.allocOne != nil && s.allocAll != nil {
		a, b := one.Median-s.allocOne.Median, last.r.Median-s.allocAll.Median
		fmt.Fprintf(w, "  %d GPUs / one GPU, medians less their allocation: %.2fx (alloc %.1f ms on one GPU, %.1f ms on %d)\n",
			last.gpus, a/b, 1e3*s.allocOne.Median, 1e3*s.allocAll.Median, last.gpus)
	}
}

// panel draws the curve: median GB/s against the GPU count, the line
// of one GPU's times the count, the processes' reference and the
// replicated load (model bytes per second) at the last count, and the
// whole file's read as a horizontal line.
func (s modelSummary) panel(kind, name string, size int64, base stResult) (benchplot.Panel, bool) {
	p := benchplot.Panel{X: benchplot.GPUs, Title: fmt.Sprintf("%s.Load, %s (%.2f GB), medians", kind, name, float64(size)/1e9)}
	if len(s.curve) == 0 {
		return p, false
	}
	load := benchplot.Series{Name: "one process, balanced", Color: 0}
	linear := benchplot.Series{Name: "one GPU x GPUs", Color: 1, Dash: 2}
	for _, c := range s.curve {
		load.X = append(load.X, float64(c.gpus))
		load.Y = append(load.Y, c.r.MedianGBps)
		linear.X = append(linear.X, float64(c.gpus))
		linear.Y = append(linear.Y, float64(c.gpus)*s.curve[0].r.MedianGBps)
	}
	p.Series = append(p.Series, load, linear)
	n := float64(s.curve[len(s.curve)-1].gpus)
	if s.procs != nil {
		p.Series = append(p.Series, benchplot.Series{Name: "one process per GPU, in step", X: []float64{n}, Y: []float64{s.procs.MedianGBps}, Color: 2})
	}
	if s.replicated != nil {
		p.Series = append(p.Series, benchplot.Series{Name: "replicated (model bytes / time)", X: []float64{n}, Y: []float64{s.replicated.MedianGBps}, Color: 3})
	}
	p.Series = append(p.Series, benchplot.Series{Name: base.Name + " (GPU 0)", X: []float64{1}, Y: []float64{base.MedianGBps}, Color: 4, Reference: true})
	return p, true
}

// slotFor returns the --slot of the processes' reference: room for a
// share's load even if the processes together move no more than one
// GPU's load does (1.5 times its median), its Close and the settle
// pause; at least 100 ms, in whole milliseconds.
func slotFor(one stResult, settle time.Duration) time.Duration {
	d := time.Duration(1.5*one.Median*float64(time.Second)) + time.Duration(median(one.CloseSeconds)*float64(time.Second)) + settle
	return max(d.Round(time.Millisecond), 100*time.Millisecond)
}
