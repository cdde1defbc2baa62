package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvikgo/kvik/internal/benchplot"
	"github.com/kvikgo/kvik/safetensors"
)

// TestGPUsFlag checks --gpus: a count is the first GPUs, a list is its
// ordinals in the order given, and every bad value is refused with what
// was wrong, before and after the visible GPUs are known.
func TestGPUsFlag(t *testing.T) {
	for _, c := range []struct {
		arg  string
		n    int
		want []int
	}{
		{"all", 4, []int{0, 1, 2, 3}},
		{"3", 4, []int{0, 1, 2}},
		{"4", 4, []int{0, 1, 2, 3}},
		{"0,2,3", 4, []int{0, 2, 3}},
		{"3,1", 4, []int{3, 1}},
		{" 2, ", 3, []int{2}},
		{"1", 1, []int{0}},
	} {
		var g gpusFlag
		if err := g.Set(c.arg); err != nil {
			t.Fatalf("--gpus %q: %v", c.arg, err)
		}
		got, err := g.resolve(c.n)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("--gpus %q with %d GPUs: %v, %v; want %v", c.arg, c.n, got, err, c.want)
		}
	}
	var zero gpusFlag
	if got, _ := zero.resolve(3); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("no --gpus with 3 GPUs: %v", got)
	}
	for arg, want := range map[string]string{
		"0":    "at least 1",
		"-2":   "at least 1",
		"x":    "want a GPU count",
		"1,1":  "listed twice",
		"-1,2": "not a GPU ordinal",
		"1,a":  "not a GPU ordinal",
		",":    "not a GPU ordinal",
	} {
		var g gpusFlag
		if err := g.Set(arg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--gpus %q: %v, want an error with %q", arg, err, want)
		}
	}
	for arg, want := range map[string]string{"3": "--gpus 3: 2 GPUs visible", "0,2": "no GPU 2 (2 GPUs visible, 0 to 1)"} {
		var g gpusFlag
		g.Set(arg)
		_, err := g.resolve(2)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) {
			t.Errorf("--gpus %s with 2 GPUs: %v, want a usage error with %q", arg, err, want)
		}
	}
}

// TestShareFlag checks --share K/N's syntax and bounds.
func TestShareFlag(t *testing.T) {
	var s shareFlag
	if err := s.Set("3/4"); err != nil || s != (shareFlag{3, 4}) || s.String() != "3/4" {
		t.Fatalf("--share 3/4: %+v, %v", s, err)
	}
	for _, bad := range []string{"4/4", "0/0", "-1/2", "a/2", "1", "1/b", "1/2/3"} {
		if err := s.Set(bad); err == nil {
			t.Errorf("--share %q accepted", bad)
		}
	}
}

// TestShareOf checks that the shares of N processes cut a file's tensors
// into N contiguous runs that cover each tensor once, with every
// tensor's bytes counted in its own share, for random sizes.
func TestShareOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 41))
	for range 200 {
		sizes := make([]int64, 1+rng.IntN(300))
		var total int64
		for i := range sizes {
			sizes[i] = int64(rng.IntN(1 << 20))
			if rng.IntN(10) == 0 {
				sizes[i] = int64(rng.IntN(64 << 20)) // an embedding among layers
			}
			total += sizes[i]
		}
		n := 1 + rng.IntN(8)
		owner := make([]int, len(sizes))
		var sum int64
		for k := range n {
			in, bytes := shareOf(sizes, shareFlag{k, n})
			var mine int64
			for i, ok := range in {
				if ok {
					owner[i] = k + 1
					mine += sizes[i]
				}
			}
			if mine != bytes {
				t.Fatalf("share %d/%d: %d bytes reported, its tensors hold %d", k, n, bytes, mine)
			}
			sum += bytes
		}
		if sum != total {
			t.Fatalf("%d shares hold %d bytes of %d", n, sum, total)
		}
		for i := range owner {
			if owner[i] == 0 || (i > 0 && owner[i] < owner[i-1]) {
				t.Fatalf("%d shares: tensor %d's share %d after %d: not contiguous runs covering every tensor", n, i, owner[i]-1, owner[max(i-1, 0)]-1)
			}
		}
	}
}

// TestCurveConfigs checks the configurations of the curve: every prefix
// of the set balanced, the replicated load and the allocations on all,
// and for GPUs 0 and 1 the names that bench/gpus_gpu.sh reads.
func TestCurveConfigs(t *testing.T) {
	names := func(cs []modelConfig) []string {
		var s []string
		for _, c := range cs {
			s = append(s, c.name)
		}
		return s
	}
	two := curveConfigs("safetensors", "base", []int{0, 1})
	if want := []string{"base", "safetensors.Load gpu0", "safetensors.Load gpu0+1 balanced", "safetensors.Load gpu0+1 replicated",
		"alloc only, gpu0", "alloc only, gpu0+1"}; !slices.Equal(names(two), want) {
		t.Errorf("two GPUs: %q, want %q", names(two), want)
	}
	if got := names(curveConfigs("gguf", "base", []int{3})); !slices.Equal(got, []string{"base", "gguf.Load gpu3"}) {
		t.Errorf("one GPU: %q", got)
	}
	set := []int{2, 0, 3, 1}
	cs := curveConfigs("gguf", "base", set)
	if len(cs) != 1+len(set)+3 || cs[0].devs != nil {
		t.Fatalf("four GPUs: %q", names(cs))
	}
	for k := 1; k <= len(set); k++ {
		c := cs[k]
		if !slices.Equal(c.devs, set[:k]) || c.replicate || c.alloc || !strings.Contains(c.name, gpuNames(set[:k])) {
			t.Errorf("curve point %d: %+v", k, c)
		}
	}
	if r := cs[len(set)+1]; !r.replicate || !slices.Equal(r.devs, set) || r.name != "gguf.Load gpu2+0+3+1 replicated" {
		t.Errorf("replicated: %+v", r)
	}
	if a, b := cs[len(set)+2], cs[len(set)+3]; !a.alloc || !b.alloc || !slices.Equal(a.devs, []int{2}) || !slices.Equal(b.devs, set) {
		t.Errorf("allocations: %+v, %+v", a, b)
	}
}

// timed returns a finished row of runs of the given seconds, of size bytes.
func timed(name string, size int64, secs ...float64) stResult {
	r := stResult{Name: name, Seconds: secs, CloseSeconds: make([]float64, len(secs))}
	for i := range secs {
		r.CloseSeconds[i] = 0.004
	}
	r.finish(size)
	return r
}

// syntheticCurve is a run over four GPUs of an 8 GB model whose load
// takes 0.2 s on one GPU (40 GB/s), then 0.1 (80), 0.08 (100) and 0.1
// again (a fourth GPU slower than three), with four processes at
// 160 GB/s.
func syntheticCurve() ([]modelConfig, []stResult, *stResult) {
	const size = 8e9
	cs := curveConfigs("safetensors", "kvik.ReadFileToDevice", []int{0, 1, 2, 3})
	rs := []stResult{
		timed(cs[0].name, size, 0.16, 0.17, 0.18),
		timed(cs[1].name, size, 0.2, 0.21, 0.2),
		timed(cs[2].name, size, 0.1, 0.1, 0.12),
		timed(cs[3].name, size, 0.08, 0.09, 0.08),
		timed(cs[4].name, size, 0.1, 0.1, 0.1),
		timed(cs[5].name, size, 0.15, 0.15, 0.15),
		timed(cs[6].name, size, 0.003, 0.002, 0.002),
		timed(cs[7].name, size, 0.01, 0.01, 0.01),
	}
	procs := timed("4 processes, each its share, in step", size, 0.05, 0.05, 0.05)
	return cs, rs, &procs
}

// TestModelSummary checks the scaling table: each GPU count's rate and
// its ratio to one GPU's, the processes' reference against one GPU and
// against one process on all, the replicated load's time against one
// GPU's, and the ratio without the allocations.
func TestModelSummary(t *testing.T) {
	cs, rs, procs := syntheticCurve()
	s := summarize(cs, rs, procs)
	if len(s.curve) != 4 || s.replicated == nil || s.allocOne == nil || s.allocAll == nil {
		t.Fatalf("summary rows: %+v", s)
	}
	var b bytes.Buffer
	s.print(&b, "safetensors")
	out := b.String()
	for _, want := range []string{
		"     1    40.00 ( 40.00)   1.00x ( 1.00x)",
		"     2    80.00 ( 80.00)   2.00x ( 2.00x)",
		"     3   100.00 (100.00)   2.50x ( 2.50x)",
		"     4    80.00 ( 80.00)   2.00x ( 2.00x)",
		"4 processes, each its share on its GPU, in step: 160.00 (160.00) GB/s, 4.00x (4.00x) one GPU; one process / 4 processes: 0.50x (0.50x)",
		"replicated on 4 GPUs, time / one GPU's: 0.75x (0.75x)",
		// (0.2 - 0.002) / (0.1 - 0.01)
		"4 GPUs / one GPU, medians less their allocation: 2.20x (alloc 2.0 ms on one GPU, 10.0 ms on 4)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	var one bytes.Buffer
	summarize(cs[:2], rs[:2], nil).print(&one, "safetensors")
	if one.Len() != 0 {
		t.Errorf("one GPU printed a curve:\n%s", one.String())
	}
}

// TestModelPanel checks the --plot picture of a curve: the load's
// medians at each count, one GPU's times the count, the processes and
// the replicated load at the last count, the file read as a line; and
// that it draws, with GPUs on the X axis.
func TestModelPanel(t *testing.T) {
	cs, rs, procs := syntheticCurve()
	p, ok := summarize(cs, rs, procs).panel("safetensors", "m.safetensors", 8e9, rs[0])
	if !ok || p.X != benchplot.GPUs {
		t.Fatalf("panel %+v, %v", p, ok)
	}
	want := map[string][2][]float64{
		"one process, balanced":           {{1, 2, 3, 4}, {40, 80, 100, 80}},
		"one GPU x GPUs":                  {{1, 2, 3, 4}, {40, 80, 120, 160}},
		"one process per GPU, in step":    {{4}, {160}},
		"replicated (model bytes / time)": {{4}, {8e9 / 0.15 / 1e9}},
	}
	for _, s := range p.Series {
		w, ok := want[s.Name]
		if !ok {
			if !s.Reference || !strings.HasPrefix(s.Name, "kvik.ReadFileToDevice") || math.Abs(s.Y[0]-8e9/0.17/1e9) > 1e-9 {
				t.Errorf("series %+v", s)
			}
			continue
		}
		delete(want, s.Name)
		if !slices.Equal(s.X, w[0]) || len(s.Y) != len(w[1]) {
			t.Errorf("%s: X %v Y %v, want %v %v", s.Name, s.X, s.Y, w[0], w[1])
			continue
		}
		for i := range s.Y {
			if math.Abs(s.Y[i]-w[1][i]) > 1e-9 {
				t.Errorf("%s: Y %v, want %v", s.Name, s.Y, w[1])
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("series missing: %v", want)
	}
	var b bytes.Buffer
	if err := benchplot.Render(&b, "svg", []benchplot.Panel{p}); err != nil {
		t.Fatal(err)
	}
	texts := svgTextSet(t, b.Bytes())
	for _, w := range []string{"GPUs", "1", "4", "one process per GPU, in step", "safetensors.Load, m.safetensors (8.00 GB), medians"} {
		if !texts[w] {
			t.Errorf("SVG lacks %q", w)
		}
	}
}

// fakeChildren stands in for the processes of the reference: each
// "loads" its share, of bytes[k] bytes, in secs[k][i] seconds at
// repetition i, after checking its command; late lists the calls
// (counting from 0) at which every process reports a late start.
type fakeChildren struct {
	t      *testing.T
	bytes  []int64
	secs   [][]float64
	late   map[int]bool
	fail   int // the process that fails, or -1
	calls  int
	slots  []time.Duration
	visits [][]childCmd
}

func (f *fakeChildren) runAll(ctx context.Context, cmds []childCmd) ([][]byte, []error) {
	call := f.calls
	f.calls++
	f.visits = append(f.visits, cmds)
	outs, errs := make([][]byte, len(cmds)), make([]error, len(cmds))
	if _, ok := ctx.Deadline(); !ok {
		f.t.Error("the processes run without a deadline")
	}
	for k, c := range cmds {
		flags := map[string]string{}
		for i := 1; i+1 < len(c.args); i++ {
			if strings.HasPrefix(c.args[i], "--") {
				flags[c.args[i]] = c.args[i+1]
			}
		}
		slot, err := time.ParseDuration(flags["--slot"])
		if err != nil || c.args[0] != "bench" || flags["--share"] != fmt.Sprintf("%d/%d", k, len(cmds)) ||
			flags["--safetensors"] != "m.safetensors" || flags["--warmup"] != "1" || c.args[len(c.args)-1] != "--json" {
			f.t.Errorf("process %d: args %q", k, c.args)
		}
		if k == 0 {
			f.slots = append(f.slots, slot)
		}
		at, err := strconv.ParseFloat(flags["--start-at"], 64)
		if lead := at - float64(time.Now().UnixNano())/1e9; err != nil || lead < 1 || lead > 60 {
			f.t.Errorf("process %d: --start-at %q is %.1f s ahead", k, flags["--start-at"], lead)
		}
		switch {
		case f.late[call]:
			errs[k] = errors.New("timed load 1 would start 12ms " + lateMarker + ": start later or give each load a longer --slot")
		case k == f.fail:
			errs[k] = errors.New("safetensors.Load share: out of memory")
		default:
			row := stResult{Name: "safetensors.Load share", Seconds: f.secs[k], CloseSeconds: f.secs[k]}
			row.finish(f.bytes[k])
			outs[k], _ = json.Marshal([]stResult{row})
		}
	}
	return outs, errs
}

// TestProcRef checks the process-per-GPU reference against fake
// processes: the commands and each process's CUDA_VISIBLE_DEVICES, the
// sum of the shares' rates repetition by repetition, a retry with twice
// the margin and slot after a late start, and failures named by share
// and GPU.
func TestProcRef(t *testing.T) {
	f := &fakeChildren{t: t, fail: -1, late: map[int]bool{0: true},
		bytes: []int64{3e9, 1e9, 2e9},
		secs:  [][]float64{{0.1, 0.2, 0.15}, {0.05, 0.025, 0.1}, {0.1, 0.1, 0.05}}}
	p := &procRef{kind: "safetensors", name: "m.safetensors", set: []int{0, 2, 3}, repeats: 3,
		slot: 300 * time.Millisecond, margin: 2 * time.Second, visible: "7,5, GPU-abc,1", hasVisible: true, runAll: f.runAll}
	r, err := p.measure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f.calls != 2 || !slices.Equal(f.slots, []time.Duration{300 * time.Millisecond, 600 * time.Millisecond}) || p.margin != 4*time.Second {
		t.Errorf("after a late start: %d calls, slots %v, margin %v", f.calls, f.slots, p.margin)
	}
	for k, c := range f.visits[1] {
		if want := []string{"CUDA_VISIBLE_DEVICES=7", "CUDA_VISIBLE_DEVICES=GPU-abc", "CUDA_VISIBLE_DEVICES=1"}[k]; !slices.Equal(c.env, []string{want}) || c.gpu != p.set[k] {
			t.Errorf("process %d: GPU %d, env %q, want %q", k, c.gpu, c.env, want)
		}
	}
	// Repetition by repetition: 30+20+20 = 70, 15+40+20 = 75, 20+10+40 = 70 GB/s.
	if r.Bytes != 6e9 || math.Abs(r.GBps-75) > 1e-9 || math.Abs(r.MedianGBps-70) > 1e-9 || len(r.Seconds) != 3 {
		t.Errorf("sum: %+v, want 6e9 bytes, 75 GB/s best, 70 median", r)
	}

	f = &fakeChildren{t: t, fail: 1, bytes: []int64{1, 1}, secs: [][]float64{{1}, {1}}}
	p = &procRef{kind: "safetensors", name: "m.safetensors", set: []int{0, 1}, repeats: 1, slot: time.Second, margin: 2 * time.Second, runAll: f.runAll}
	if _, err := p.measure(context.Background()); err == nil || !strings.Contains(err.Error(), "share 1/2 onto GPU 1: safetensors.Load share: out of memory") || f.calls != 1 {
		t.Errorf("a failed process: %v after %d calls", err, f.calls)
	}
	f = &fakeChildren{t: t, fail: -1, late: map[int]bool{0: true, 1: true}, bytes: []int64{1, 1}, secs: [][]float64{{1}, {1}}}
	p.runAll = f.runAll
	if _, err := p.measure(context.Background()); err == nil || !strings.Contains(err.Error(), lateMarker) || f.calls != 2 {
		t.Errorf("late twice: %v after %d calls", err, f.calls)
	}
	p.repeats = 2 // the processes' output has one load each
	f = &fakeChildren{t: t, fail: -1, bytes: []int64{1, 1}, secs: [][]float64{{1}, {1}}}
	p.runAll = f.runAll
	if _, err := p.measure(context.Background()); err == nil || !strings.Contains(err.Error(), "want one of 2 loads") {
		t.Errorf("short output: %v", err)
	}
}

// TestVisibleDevice checks each process's CUDA_VISIBLE_DEVICES: the
// parent's ordinal without the variable, else its entry in the list.
func TestVisibleDevice(t *testing.T) {
	p := &procRef{}
	if v, err := p.visibleDevice(3); v != "3" || err != nil {
		t.Errorf("unset: %q, %v", v, err)
	}
	p.visible, p.hasVisible = "2,0", true
	if v, err := p.visibleDevice(1); v != "0" || err != nil {
		t.Errorf("2,0: ordinal 1 is %q, %v", v, err)
	}
	if _, err := p.visibleDevice(2); err == nil {
		t.Error("an ordinal past CUDA_VISIBLE_DEVICES accepted")
	}
}

// TestSlotFor checks the reference's slot: 1.5 one GPU's median load,
// its Close and the settle pause, at least 100 ms.
func TestSlotFor(t *testing.T) {
	one := timed("one", 1, 0.2, 0.3, 0.1)
	if got := slotFor(one, 200*time.Millisecond); got != 504*time.Millisecond {
		t.Errorf("slot %v, want 504ms (300 + 4 + 200)", got)
	}
	if got := slotFor(timed("tiny", 1, 0.001), 0); got != 100*time.Millisecond {
		t.Errorf("slot %v for a 1 ms load, want the 100 ms floor", got)
	}
}

// TestBenchGPUsCLI checks --gpus and --share on the command line: bad
// values and combinations are usage errors, and without a GPU the load
// says it needs one.
func TestBenchGPUsCLI(t *testing.T) {
	src := filepath.Join(t.TempDir(), "m.safetensors")
	data := []byte("0123456789abcdef")
	if err := safetensors.Save(context.Background(), src, []safetensors.SaveTensor{{Name: "w", Dtype: safetensors.U8, Shape: []int64{16}, Data: data}}, nil); err != nil {
		t.Fatal(err)
	}
	runKvik(t, nil, "bench", "--gpus", "2").expect(t, exitUsage).oneLineError(t, "--gpus and --share apply to --safetensors and --gguf")
	runKvik(t, nil, "bench", "--safetensors", src, "--gpus", "1,1").expect(t, exitUsage).oneLineError(t, "listed twice")
	runKvik(t, nil, "bench", "--safetensors", src, "--gpus", "0").expect(t, exitUsage).oneLineError(t, "at least 1")
	runKvik(t, nil, "bench", "--safetensors", src, "--share", "2/2").expect(t, exitUsage).oneLineError(t, "K/N")
	runKvik(t, nil, "bench", "--safetensors", src, "--share", "0/2", "--gpus", "2").expect(t, exitUsage).oneLineError(t, "drop --gpus")
	if hasGPU() {
		runKvik(t, nil, "bench", "--safetensors", src, "--gpus", "99").expect(t, exitUsage).oneLineError(t, "visible")
		return
	}
	for _, args := range [][]string{{"--safetensors", src}, {"--safetensors", src, "--gpus", "0,1"}, {"--gguf", src, "--share", "0/2"}} {
		runKvik(t, nil, append([]string{"bench"}, args...)...).expect(t, exitFailure).oneLineError(t, "needs a GPU")
	}
}

// TestBenchModelGPUs runs the curve on the GPUs here: a row per GPU
// count, and with two or more the processes' reference and the scaling
// table; --share loads one share. It needs a GPU.
func TestBenchModelGPUs(t *testing.T) {
	if !hasGPU() {
		t.Skip("no GPU")
	}
	src := filepath.Join(t.TempDir(), "m.safetensors")
	rng := rand.New(rand.NewPCG(1, 2))
	var ts []safetensors.SaveTensor
	for i := range 24 {
		b := make([]byte, 1+rng.IntN(4<<20))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		ts = append(ts, safetensors.SaveTensor{Name: fmt.Sprintf("t%02d", i), Dtype: safetensors.U8, Shape: []int64{int64(len(b))}, Data: b})
	}
	if err := safetensors.Save(context.Background(), src, ts, nil); err != nil {
		t.Fatal(err)
	}
	plot := filepath.Join(t.TempDir(), "curve.svg")
	r := runKvik(t, nil, "bench", "--safetensors", src, "--repeats", "2", "--plot", plot).expect(t, exitOK)
	if !strings.Contains(r.stdout, "safetensors.Load gpu0 ") {
		t.Fatalf("no one-GPU row:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "safetensors.Load gpu0+1 balanced") {
		for _, w := range []string{"x one GPU", "processes, each its share on its GPU, in step", "replicated on"} {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("two or more GPUs, no %q:\n%s", w, r.stdout)
			}
		}
	}
	if b, err := os.ReadFile(plot); err != nil || !svgTextSet(t, b)["GPUs"] {
		t.Errorf("--plot: %v", err)
	}
	r = runKvik(t, nil, "bench", "--safetensors", src, "--repeats", "2", "--share", "1/3", "--json").expect(t, exitOK)
	var rows []stResult
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 1 || len(rows[0].Seconds) != 2 {
		t.Fatalf("--share --json: %v\n%s", err, r.stdout)
	}
	sizes := make([]int64, len(ts))
	for i := range ts {
		sizes[i] = int64(len(ts[i].Data))
	}
	if _, want := shareOf(sizes, shareFlag{1, 3}); rows[0].Bytes != want {
		t.Errorf("--share 1/3 moved %d bytes, want %d", rows[0].Bytes, want)
	}
}
