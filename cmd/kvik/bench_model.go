package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/formatkit/tensorload"
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
	GBps         float64   `json:"gb_per_s"` // at the best time
	// MedianGBps is the throughput at the median time.
	MedianGBps float64 `json:"median_gb_per_s"`
}

// benchModel times the whole model file at name read into device memory
// (kvik.ReadFileToDevice, or for a URL a RemoteHandle.ReadDevice into a
// new allocation), its load (of format kind) onto GPU 0 and, with two
// GPUs, the balanced load onto GPUs 0 and 1 and the replicated load (the
// whole model on both), each --repeats times (the
// page cache dropped first with --drop-cache), and prints the best and
// median times and their ratios.
func benchModel(e *env, o *benchOptions, name, kind string, load func(devs []int, replicate bool) (io.Closer, error)) error {
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
		what := "--" + kind
		if o.url != "" {
			what = "--url of a " + kind + " file" // the user typed --url, not --safetensors
		}
		return fmt.Errorf("%s needs a GPU (it times loads onto GPU 0): %w", what, err)
	}
	defer g.close()
	ngpu, err := cuda.DeviceGetCount()
	if err != nil {
		return err
	}
	type config struct {
		name string
		run  func() (io.Closer, error) // timed; its Close is timed apart
	}
	base := config{"kvik.ReadFileToDevice", func() (io.Closer, error) { return kvik.ReadFileToDevice(name) }}
	if remote {
		base = config{"RemoteHandle.ReadDevice", func() (io.Closer, error) { return readObjectToDevice(g, name) }}
	}
	configs := []config{base, {kind + ".Load gpu0", func() (io.Closer, error) { return load([]int{0}, false) }}}
	if ngpu >= 2 {
		configs = append(configs,
			config{kind + ".Load gpu0+1 balanced", func() (io.Closer, error) { return load([]int{0, 1}, false) }},
			config{kind + ".Load gpu0+1 replicated", func() (io.Closer, error) { return load([]int{0, 1}, true) }},
			// The fixed cost beside the reads: a load allocates its
			// shares (one GPU after the other); Close frees them.
			config{"alloc only, gpu0", func() (io.Closer, error) { return alloc([]int{0}, size) }},
			config{"alloc only, gpu0+1", func() (io.Closer, error) { return alloc([]int{0, 1}, size) }})
	}
	// The configurations take turns, repetition by repetition, each round
	// starting with the next one: a disk drifts by more within a run than
	// the differences looked for.
	results := make([]stResult, len(configs))
	for i, c := range configs {
		results[i].Name = c.name
	}
	for rep := range o.repeats {
		for k := range configs {
			i := (k + rep) % len(configs)
			if err := o.waitSlot(rep*len(configs) + k); err != nil {
				return err
			}
			if o.dropCache {
				if err := kvik.DropFilePageCache(name, 0, 0); err != nil {
					return err
				}
			}
			t0 := time.Now()
			c, err := configs[i].run()
			t1 := time.Now()
			if err == nil {
				err = c.Close()
			}
			if err != nil {
				return fmt.Errorf("%s: %w", configs[i].name, err)
			}
			results[i].Seconds = append(results[i].Seconds, t1.Sub(t0).Seconds())
			results[i].CloseSeconds = append(results[i].CloseSeconds, time.Since(t1).Seconds())
			if o.slot == 0 {
				// Each run's allocation starts clear of the last one's free.
				time.Sleep(o.settle)
			}
		}
	}
	for i := range results {
		results[i].finish(size)
	}
	if o.json {
		return writeJSON(e.stdout, results)
	}
	cache := "warm"
	switch {
	case remote:
		cache = "remote"
	case o.dropCache:
		cache = "cold (page cache dropped)"
	}
	fmt.Fprintf(e.stdout, "%s %s: %.2f GB, %s, %s taking turns; best (median)\n", kind, redact(name), float64(size)/1e9, cache, count(o.repeats, "repetition"))
	for _, r := range results {
		fmt.Fprintf(e.stdout, "  %-34s %8.3f s  %7.2f GB/s (%.2f)  %.2fx (%.2fx) %s; Close %.1f ms\n",
			r.Name, r.Best, r.GBps, r.MedianGBps, results[0].Best/r.Best, results[0].Median/r.Median, results[0].Name, 1e3*median(r.CloseSeconds))
	}
	if len(results) >= 4 {
		fmt.Fprintf(e.stdout, "  two GPUs / one GPU: %.2fx (%.2fx)\n", results[1].Best/results[2].Best, results[1].Median/results[2].Median)
		fmt.Fprintf(e.stdout, "  replicated on two GPUs, time / one GPU's: %.2fx (%.2fx)\n", results[3].Best/results[1].Best, results[3].Median/results[1].Median)
	}
	if len(results) == 6 {
		one, two := results[1].Median-results[4].Median, results[2].Median-results[5].Median
		fmt.Fprintf(e.stdout, "  two GPUs / one GPU, medians less their allocation: %.2fx (alloc %.1f ms on one GPU, %.1f ms on two)\n",
			one/two, 1e3*results[4].Median, 1e3*results[5].Median)
	}
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
