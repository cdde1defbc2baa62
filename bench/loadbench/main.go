// Command loadbench times the load of a safetensors, GGUF, .npy, .npz or
// PyTorch (.pt, .pth, .bin) file (by its name's extension), from a path
// or a URL, into host memory (LoadHost) or onto GPU 0 (Load), against
// the plain read of the same file or object into new memory of the same
// kind (kvik.OpenReader, then ReadAt or ReadDevice into a new
// allocation): the ceiling the load should meet. It covers what kvik
// bench --safetensors, --gguf and --url do not: host loads, .npy arrays,
// .npz archives and torch.save files.
//
//	loadbench -memory host|device [-repeats 5] [-settle 200ms] NAME...
//
// The read and the load take turns, round by round, each round starting
// with the other. Every timed run opens, allocates and reads; freeing is
// not timed. Between host runs Go's heap is returned to the system, so
// that each run faults its memory in, as a new process (or a Python
// peer) does; after a device run's free it pauses -settle, as kvik bench
// does. Per NAME it prints one JSON line, {"name", "format", "memory",
// "bytes", "results": [read, load]}, each result as kvik bench --json
// gives those of --safetensors, and a summary line on stderr. S3
// credentials and endpoint come from the AWS_* variables. The bytes
// loaded are not checked here: the GPU tests (bench/gpu_tests.sh) do.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/gguf"
	"github.com/kvikgo/kvik/npy"
	"github.com/kvikgo/kvik/safetensors"
	"github.com/kvikgo/kvik/torch"
)

// result is one configuration's timings, with kvik bench --json's fields.
type result struct {
	Name       string    `json:"name"`
	Seconds    []float64 `json:"seconds"`
	Best       float64   `json:"best_seconds"`
	Median     float64   `json:"median_seconds"`
	GBps       float64   `json:"gb_per_s"`        // at the best time
	MedianGBps float64   `json:"median_gb_per_s"` // at the median time
}

// report is the JSON line of one NAME.
type report struct {
	Name    string   `json:"name"`
	Format  string   `json:"format"`
	Memory  string   `json:"memory"`
	Bytes   int64    `json:"bytes"`
	Results []result `json:"results"`
}

// config is one timed way of bringing NAME into memory; what it returns
// is closed after the timing.
type config struct {
	name string
	run  func() (io.Closer, error)
}

func main() {
	memory := flag.String("memory", "host", "memory to load into: host or device (GPU 0)")
	repeats := flag.Int("repeats", 5, "timed rounds (`count`)")
	settle := flag.Duration("settle", 200*time.Millisecond, "pause after freeing device memory, untimed")
	flag.Parse()
	if (*memory != "host" && *memory != "device") || *repeats < 1 || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: loadbench -memory host|device [-repeats N] [-settle D] NAME...")
		os.Exit(2)
	}
	var g *gpu
	if *memory == "device" {
		var err error
		if g, err = openGPU(); err != nil {
			log.Fatal(err)
		}
		defer g.dev.PrimaryCtxRelease()
	}
	enc := json.NewEncoder(os.Stdout)
	for _, name := range flag.Args() {
		r, err := bench(name, g, *repeats, *settle)
		if err != nil {
			log.Fatalf("%s: %v", kvik.RedactURL(name), err)
		}
		if err := enc.Encode(r); err != nil {
			log.Fatal(err)
		}
		read, load := r.Results[0], r.Results[1]
		fmt.Fprintf(os.Stderr, "%-44s %.2f GB, %s %.2f (%.2f) GB/s, %s %.2f (%.2f) GB/s, load/read %.2fx (%.2fx)\n",
			kvik.RedactURL(name), float64(r.Bytes)/1e9, read.Name, read.GBps, read.MedianGBps,
			load.Name, load.GBps, load.MedianGBps, read.Best/load.Best, read.Median/load.Median)
	}
}

// bench times NAME's read and load, taking turns.
func bench(name string, g *gpu, repeats int, settle time.Duration) (report, error) {
	ctx := context.Background()
	format := strings.TrimPrefix(path.Ext(strings.ToLower(name)), ".")
	if format == "pt" || format == "pth" || format == "bin" {
		format = "torch"
	}
	load, err := loader(ctx, format, name, g == nil)
	if err != nil {
		return report{}, err
	}
	r, size, err := openSized(ctx, name)
	if err != nil {
		return report{}, err
	}
	r.Close()
	rep := report{Name: kvik.RedactURL(name), Format: format, Memory: "host", Bytes: size}
	read := config{"read into host memory", func() (io.Closer, error) { return readHost(ctx, name) }}
	if g != nil {
		rep.Memory = "device"
		read = config{"read into GPU memory", func() (io.Closer, error) { return g.read(ctx, name) }}
	}
	configs := []config{read, load}
	secs := make([][]float64, len(configs))
	// One untimed round first: connections, contexts and pools.
	for round := -1; round < repeats; round++ {
		for k := range configs {
			i := (k + max(round, 0)) % len(configs)
			t0 := time.Now()
			c, err := configs[i].run()
			t := time.Since(t0)
			if err == nil {
				err = c.Close()
			}
			if err != nil {
				return report{}, fmt.Errorf("%s: %w", configs[i].name, err)
			}
			if round >= 0 {
				secs[i] = append(secs[i], t.Seconds())
			}
			if g == nil {
				debug.FreeOSMemory() // the next run faults its memory in again
			} else {
				time.Sleep(settle)
			}
		}
	}
	for i, c := range configs {
		rep.Results = append(rep.Results, finish(c.name, secs[i], size))
	}
	return rep, nil
}

// loader returns the timed load of NAME in format, into host memory or
// onto GPU 0.
func loader(ctx context.Context, format, name string, host bool) (config, error) {
	var run func() (io.Closer, error)
	switch {
	case format == "safetensors" && host:
		run = func() (io.Closer, error) { return closer(safetensors.LoadHost(ctx, name, nil)) }
	case format == "safetensors":
		run = func() (io.Closer, error) { return closer(safetensors.Load(ctx, name, nil)) }
	case format == "gguf" && host:
		run = func() (io.Closer, error) { return closer(gguf.LoadHost(ctx, name, nil)) }
	case format == "gguf":
		run = func() (io.Closer, error) { return closer(gguf.Load(ctx, name, nil)) }
	case format == "npy" && host:
		run = func() (io.Closer, error) { return closer(npy.LoadHost(ctx, name, nil)) }
	case format == "npy":
		run = func() (io.Closer, error) { return closer(npy.Load(ctx, name, nil)) }
	case format == "npz" && host:
		run = func() (io.Closer, error) { return closer(npy.LoadNpzHost(ctx, name, nil)) }
	case format == "npz":
		run = func() (io.Closer, error) { return closer(npy.LoadNpz(ctx, name, nil)) }
	case format == "torch" && host:
		run = func() (io.Closer, error) { return closer(torch.LoadHost(ctx, name, nil)) }
	case format == "torch":
		run = func() (io.Closer, error) { return closer(torch.Load(ctx, name, nil)) }
	default:
		return config{}, fmt.Errorf("unknown format %q: want a .safetensors, .gguf, .npy, .npz, .pt, .pth or .bin name", format)
	}
	fn := format + ".Load"
	if host {
		fn = format + ".LoadHost"
	}
	if format == "npz" {
		fn = "npy.LoadNpz"
		if host {
			fn = "npy.LoadNpzHost"
		}
	}
	return config{fn, run}, nil
}

// closer returns what a load returned as an io.Closer.
func closer[M io.Closer](m M, err error) (io.Closer, error) {
	if err != nil {
		return nil, err
	}
	return m, nil
}

// readHost reads the whole file or object at name into new host memory.
func readHost(ctx context.Context, name string) (io.Closer, error) {
	r, size, err := openSized(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	buf := make([]byte, size)
	n, err := r.ReadAt(buf, 0)
	if errors.Is(err, io.EOF) && int64(n) == size {
		err = nil
	}
	if err == nil && int64(n) != size {
		err = fmt.Errorf("read %d of %d bytes", n, size)
	}
	runtime.KeepAlive(buf)
	return nothing{}, err
}

// openSized opens the file or object at name and returns its size.
func openSized(ctx context.Context, name string) (kvik.Reader, int64, error) {
	r, err := kvik.OpenReader(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	size, err := r.Size()
	if err != nil {
		r.Close()
		return nil, 0, err
	}
	return r, size, nil
}

// nothing is what a host read returns: its memory goes to the collector.
type nothing struct{}

func (nothing) Close() error { return nil }

// gpu holds GPU 0's primary context for the whole run.
type gpu struct {
	dev cuda.Device
	ctx cuda.Context
}

func openGPU() (*gpu, error) {
	if err := cuda.Init(); err != nil {
		return nil, err
	}
	dev, err := cuda.DeviceGet(0)
	if err != nil {
		return nil, err
	}
	ctx, err := dev.PrimaryCtxRetain()
	if err != nil {
		return nil, err
	}
	return &gpu{dev, ctx}, nil
}

// read reads the whole file or object at name into a new allocation on
// the GPU, as kvik.ReadFileToDevice does for a file; the caller frees it.
func (g *gpu) read(ctx context.Context, name string) (io.Closer, error) {
	r, size, err := openSized(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var buf *cuda.DeviceBuffer
	if err := cuda.WithContext(g.ctx, func() (err error) { buf, err = cuda.MemAlloc(int(max(size, 1))); return err }); err != nil {
		return nil, err
	}
	n, err := r.ReadDevice(buf.Ptr(), int(size), 0, 0)
	if err == nil && int64(n) != size {
		err = fmt.Errorf("read %d of %d bytes", n, size)
	}
	if err != nil {
		buf.Close()
		return nil, err
	}
	return buf, nil
}

// finish summarises one configuration's times of size bytes.
func finish(name string, secs []float64, size int64) result {
	s := slices.Sorted(slices.Values(secs))
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return result{Name: name, Seconds: secs, Best: s[0], Median: med,
		GBps: float64(size) / s[0] / 1e9, MedianGBps: float64(size) / med / 1e9}
}
