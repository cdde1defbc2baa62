package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/gguf"
	"github.com/kvikgo/kvik/internal/benchplot"
	"github.com/kvikgo/kvik/internal/formatkit/tensorload"
	"github.com/kvikgo/kvik/safetensors"
)

// stResult is one configuration of kvik bench --safetensors or --gguf.
type stResult struct {
	Name    string    `json:"name"`
	Seconds []float64 `json:"seconds"`
	// CloseSeconds are the times of freeing what each timed run made,
	// outside Seconds: a load's time is until its tensors are usable.
	CloseSeconds []float64 `json:"close_seconds"`
	Best         float64   `json:"best_seconds"`
	Median       float64   `json:"median_seconds"`
	// Bytes are what each timed run moved: the file's size, or a
	// share's tensors with --share.
	Bytes int64   `json:"bytes"`
	GBps  float64 `json:"gb_per_s"` // at the best time
	// MedianGBps is the throughput at the median time.
	MedianGBps float64 `json:"median_gb_per_s"`
}

// modelFormat is what kvik bench needs of a model format.
type modelFormat struct {
	kind string // "safetensors" or "gguf"
	// load loads the file's tensors that keep accepts (every one if keep
	// is nil) onto devs, balanced or replicated.
	load func(devs []int, replicate bool, keep func(name string) bool) (io.Closer, error)
	// tensors lists the file's tensors, names and sizes, in the order of
	// its header (the order a balanced load places them in).
	tensors func() ([]string, []int64, error)
}

// safetensorsFormat is kvik bench's view of the safetensors file at name.
func safetensorsFormat(name string) modelFormat {
	ctx := context.Background()
	return modelFormat{kind: "safetensors",
		load: func(devs []int, replicate bool, keep func(string) bool) (io.Closer, error) {
			o := &safetensors.Options{Devices: devs, Replicate: replicate}
			if keep != nil {
				o.Filter = func(t *safetensors.TensorInfo) bool { return keep(t.Name) }
			}
			return closer(safetensors.Load(ctx, name, o))
		},
		tensors: func() ([]string, []int64, error) {
			h, err := safetensors.ReadHeader(ctx, name, nil)
			if err != nil {
				return nil, nil, err
			}
			names, sizes := namesSizes(h.Tensors, func(t *safetensors.TensorInfo) (string, int64) { return t.Name, t.Size() })
			return names, sizes, nil
		}}
}

// ggufFormat is kvik bench's view of the GGUF file at name.
func ggufFormat(name string) modelFormat {
	ctx := context.Background()
	return modelFormat{kind: "gguf",
		load: func(devs []int, replicate bool, keep func(string) bool) (io.Closer, error) {
			o := &gguf.Options{Devices: devs, Replicate: replicate}
			if keep != nil {
				o.Filter = func(t *gguf.TensorInfo) bool { return keep(t.Name) }
			}
			return closer(gguf.Load(ctx, name, o))
		},
		tensors: func() ([]string, []int64, error) {
			h, err := gguf.ReadHeader(ctx, name, nil)
			if err != nil {
				return nil, nil, err
			}
			names, sizes := namesSizes(h.Tensors, func(t *gguf.TensorInfo) (string, int64) { return t.Name, t.Size() })
			return names, sizes, nil
		}}
}

// namesSizes lists the names and sizes of a header's tensors.
func namesSizes[T any](ts []T, of func(*T) (string, int64)) ([]string, []int64) {
	names, sizes := make([]string, len(ts)), make([]int64, len(ts))
	for i := range ts {
		names[i], sizes[i] = of(&ts[i])
	}
	return names, sizes
}

// benchModel times the whole model file at name read into device memory
// (kvik.ReadFileToDevice, or for a URL a RemoteHandle.ReadDevice into a
// new allocation) and its load (of format f) balanced over the first 1,
// 2, ... N GPUs of --gpus (every visible GPU by default) and, with
// several, the replicated load (the whole model on each) and the loads'
// allocations alone, each --repeats times (the page cache dropped first
// with --drop-cache), and prints the best and median times and their
// ratios, then the curve over the GPU counts beside N processes each
// loading its share onto its own GPU in step (procRef). With --share
// K/N it times only that share's load onto GPU 0, for procRef.
func benchModel(e *env, o *benchOptions, name string, f modelFormat) error {
	remote := isURL(name)
	if remote && o.dropCache {
		return usagef("--drop-cache applies to local files, not %s", redact(name))
	}
	r, size, err := openSized(name)
	if err != nil {
		return err
	}
	r.Close()
	g, err := openGPU() // holds GPU 0's context for every run
	if err != nil {
		what := "--" + f.kind
		if o.url != "" {
			what = "--url of a " + f.kind + " file" // the user typed --url, not --safetensors
		}
		return fmt.Errorf("%s needs a GPU (it times loads onto GPU 0): %w", what, err)
	}
	defer g.close()
	ngpu, err := cuda.DeviceGetCount()
	if err != nil {
		return err
	}
	set, err := o.gpus.resolve(ngpu)
	if err != nil {
		return err
	}
	m := &modelRun{o: o, g: g, f: f, name: name, size: size, remote: remote}
	configs := curveConfigs(f.kind, "kvik.ReadFileToDevice", set)
	if remote {
		configs[0].name = "RemoteHandle.ReadDevice"
	}
	if o.share.n > 0 {
		if configs, err = m.shareConfig(); err != nil {
			return err
		}
	}
	results, err := m.time(configs)
	if err != nil {
		return err
	}
	var procs *stResult
	var procErr error
	if len(set) > 1 && o.share.n == 0 && o.slot == 0 && !o.noBase && !o.dropCache {
		procs, procErr = processPerGPU(f.kind, name, set, o, results[1])
	}
	if err := m.report(e, configs, results, procs); err != nil {
		return err
	}
	return procErr
}

// processPerGPU measures the process-per-GPU reference (procRef) of a
// load onto set, one GPU's load taking one.
func processPerGPU(kind, name string, set []int, o *benchOptions, one stResult) (*stResult, error) {
	ref, err := newProcRef(kind, name, set, o.repeats, one, o.settle)
	if err == nil {
		kvik.FreeBounceBuffers() // the processes pin their own
		var r *stResult
		if r, err = ref.measure(context.Background()); err == nil {
			return r, nil
		}
	}
	return nil, fmt.Errorf("the process-per-GPU reference (the rows above stand): %w", err)
}

// modelRun is one run of kvik bench --safetensors or --gguf.
type modelRun struct {
	o      *benchOptions
	g      *gpuDevice
	f      modelFormat
	name   string
	size   int64 // bytes that each timed run moves: the file's, or the share's
	remote bool
	keep   func(name string) bool // --share: the share's tensors
}

// shareConfig sets up --share K/N: the one configuration, the share's
// load onto GPU 0, and its bytes.
func (m *modelRun) shareConfig() ([]modelConfig, error) {
	names, sizes, err := m.f.tensors()
	if err != nil {
		return nil, err
	}
	in, n := shareOf(sizes, m.o.share)
	if n == 0 {
		return nil, fmt.Errorf("--share %s: no tensor bytes in that share", m.o.share.String())
	}
	keep := make(map[string]bool)
	for i, ok := range in {
		if ok {
			keep[names[i]] = true
		}
	}
	m.keep, m.size = func(name string) bool { return keep[name] }, n
	return []modelConfig{{name: fmt.Sprintf("%s.Load share %s gpu0", m.f.kind, m.o.share.String()), devs: []int{0}}}, nil
}

// run runs one configuration; its Close is timed apart.
func (m *modelRun) run(c modelConfig) (io.Closer, error) {
	switch {
	case c.devs == nil && m.remote:
		return readObjectToDevice(m.g, m.name)
	case c.devs == nil:
		return kvik.ReadFileToDevice(m.name)
	case c.alloc:
		return alloc(c.devs, m.size)
	}
	return m.f.load(c.devs, c.replicate, m.keep)
}

// time runs --warmup untimed repetitions of every configuration, then
// --repeats timed ones. The configurations take turns, repetition by
// repetition, each round starting with the next one: a disk drifts by
// more within a run than the differences looked for.
func (m *modelRun) time(configs []modelConfig) ([]stResult, error) {
	o := m.o
	results := make([]stResult, len(configs))
	for i, c := range configs {
		results[i].Name = c.name
	}
	for rep := -o.warmup; rep < o.repeats; rep++ {
		for k := range configs {
			i := (k + max(rep, 0)) % len(configs)
			if rep >= 0 {
				if err := o.waitSlot(rep*len(configs) + k); err != nil {
					return nil, err
				}
			}
			load, free, err := m.timeOne(configs[i])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", configs[i].name, err)
			}
			if rep >= 0 {
				results[i].Seconds = append(results[i].Seconds, load)
				results[i].CloseSeconds = append(results[i].CloseSeconds, free)
			}
			if o.slot == 0 || rep < 0 {
				// Each run's allocation starts clear of the last one's free.
				time.Sleep(o.settle)
			}
		}
	}
	for i := range results {
		results[i].finish(m.size)
	}
	return results, nil
}

// timeOne runs c and closes what it made, and returns the seconds of each.
func (m *modelRun) timeOne(c modelConfig) (load, free float64, err error) {
	if m.o.dropCache {
		if err := kvik.DropFilePageCache(m.name, 0, 0); err != nil {
			return 0, 0, err
		}
	}
	t0 := time.Now()
	x, err := m.run(c)
	t1 := time.Now()
	if err == nil {
		err = x.Close()
	}
	return t1.Sub(t0).Seconds(), time.Since(t1).Seconds(), err
}

// report prints the rows (or --json), the summary and --plot.
func (m *modelRun) report(e *env, configs []modelConfig, results []stResult, procs *stResult) error {
	o := m.o
	sum := summarize(configs, results, procs)
	if o.plot != "" {
		p, ok := sum.panel(m.f.kind, redact(m.name), m.size, results[0])
		if !ok {
			return fmt.Errorf("--plot %s: %w", o.plot, benchplot.ErrEmpty)
		}
		if err := benchplot.Save(o.plot, []benchplot.Panel{p}); err != nil {
			return err
		}
	}
	if procs != nil {
		results = append(results, *procs)
	}
	if o.json {
		return writeJSON(e.stdout, results)
	}
	cache := "warm"
	switch {
	case m.remote:
		cache = "remote"
	case o.dropCache:
		cache = "cold (page cache dropped)"
	}
	fmt.Fprintf(e.stdout, "%s %s: %.2f GB, %s, %s taking turns; best (median)\n", m.f.kind, redact(m.name), float64(m.size)/1e9, cache, count(o.repeats, "repetition"))
	for _, r := range results {
		fmt.Fprintf(e.stdout, "  %-40s %8.3f s  %7.2f GB/s (%.2f)  %.2fx (%.2fx) %s; Close %.1f ms\n",
			r.Name, r.Best, r.GBps, r.MedianGBps, results[0].Best/r.Best, results[0].Median/r.Median, results[0].Name, 1e3*median(r.CloseSeconds))
	}
	sum.print(e.stdout, m.f.kind)
	return nil
}

// waitSlot waits for the start of timed run k under --start-at and
// --slot: processes given the same values start their runs together, so
// that each run meets the others' (two processes, one GPU each, against
// one process on both). A run that would start more than a millisecond
// late would meet other runs than intended: that is an error.
func (o *benchOptions) waitSlot(k int) error {
	if o.slot == 0 {
		return nil
	}
	at := o.startAt.Add(time.Duration(k) * o.slot)
	if late := time.Since(at); late > time.Millisecond {
		return fmt.Errorf("timed load %d would start %v after its --start-at/--slot time: start later or give each load a longer --slot", k+1, late.Round(time.Millisecond))
	}
	time.Sleep(time.Until(at))
	return nil
}

// alloc allocates size bytes on the devices devs, an even share on
// each, as a load's allocation does (tensorload.Alloc).
func alloc(devs []int, size int64) (io.Closer, error) {
	totals := make([]int64, len(devs))
	for i := range totals {
		totals[i] = size / int64(len(devs))
	}
	return tensorload.Alloc(devs, totals)
}

// finish fills r's best and median times and rates from its timed runs
// of size bytes.
func (r *stResult) finish(size int64) {
	r.Bytes = size
	r.Best, r.Median = slices.Min(r.Seconds), median(r.Seconds)
	r.GBps = float64(size) / r.Best / 1e9
	r.MedianGBps = float64(size) / r.Median / 1e9
}

// closer returns what a load returned as an io.Closer, which the
// benchmark closes after it has timed the load.
func closer[M io.Closer](m M, err error) (io.Closer, error) {
	if err != nil {
		return nil, err
	}
	return m, nil
}

// readObjectToDevice reads the whole object at url into a new allocation
// on g, as kvik.ReadFileToDevice does for a file: open, allocate, read.
// The caller frees the allocation.
func readObjectToDevice(g *gpuDevice, url string) (io.Closer, error) {
	h, size, err := openSized(url)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	buf, err := g.alloc(int(max(size, 1)))
	if err != nil {
		return nil, err
	}
	n, err := h.ReadDevice(buf.Ptr(), int(size), 0, 0)
	if err == nil && int64(n) != size {
		err = fmt.Errorf("read %d of %d bytes", n, size)
	}
	if err != nil {
		buf.Close()
		return nil, err
	}
	return buf, nil
}
