package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/safetensors"
)

// benchSave times saving the safetensors checkpoint at name, loaded once
// into memory, as new files in o.dir (kvik bench --safetensors FILE
// --save): from GPU 0's memory, from GPUs 0 and 1 (balanced, with two
// GPUs), from host memory, and sharded from GPU 0, against
// kvik.SaveFile of the file's bytes from host memory (the write ceiling
// of the same path: atomic, synced) and kvik.WriteFileFromDevice of the
// file's bytes in one device buffer. The configurations take turns; each
// file is removed after its repetition, outside the timing, so that every
// save writes a new file.
func benchSave(e *env, o *benchOptions, name string) error {
	if isURL(name) {
		return usagef("--save loads a local file, not %s", redact(name))
	}
	if o.dropCache {
		return usagef("--save times writes: --drop-cache does not apply")
	}
	g, err := openGPU()
	if err != nil {
		return fmt.Errorf("--save needs a GPU: %w", err)
	}
	defer g.close()
	ngpu, err := cuda.DeviceGetCount()
	if err != nil {
		return err
	}
	ctx := context.Background()
	fi, err := os.Stat(name)
	if err != nil {
		return err
	}
	size := fi.Size()
	raw, free, err := allocHost(size)
	if err != nil {
		return err
	}
	defer free()
	if err := readWhole(name, raw[:size]); err != nil {
		return err
	}
	whole, err := kvik.ReadFileToDevice(name)
	if err != nil {
		return err
	}
	defer whole.Close()
	host, err := safetensors.LoadHost(ctx, name, nil)
	if err != nil {
		return err
	}
	defer host.Close()
	gpu0, err := safetensors.Load(ctx, name, nil)
	if err != nil {
		return err
	}
	defer gpu0.Close()
	var gpu01 *safetensors.Model
	if ngpu >= 2 {
		if gpu01, err = safetensors.Load(ctx, name, &safetensors.Options{Devices: []int{0, 1}}); err != nil {
			return err
		}
		defer gpu01.Close()
	}
	out := filepath.Join(o.dir, fmt.Sprintf("kvik-save-%d", os.Getpid()))
	if err := os.MkdirAll(out, 0o777); err != nil {
		return err
	}
	defer os.RemoveAll(out)
	file := filepath.Join(out, "model.safetensors")
	type config struct {
		name string
		run  func() error
	}
	configs := []config{
		{"kvik.SaveFile host bytes", func() error {
			return kvik.SaveFile(ctx, file, []kvik.Piece{{Data: raw[:size]}})
		}},
		{"kvik.WriteFileFromDevice gpu0", func() error { return kvik.WriteFileFromDevice(file, whole) }},
		{"safetensors.Save gpu0", func() error { return safetensors.Save(ctx, file, saveTensors(gpu0), gpu0.Metadata) }},
		{"safetensors.Save host", func() error { return safetensors.Save(ctx, file, saveTensors(host), host.Metadata) }},
	}
	if gpu01 != nil {
		configs = append(configs, config{"safetensors.Save gpu0+1", func() error {
			return safetensors.Save(ctx, file, saveTensors(gpu01), gpu01.Metadata)
		}})
	}
	configs = append(configs, config{"safetensors.SaveSharded gpu0 2GB", func() error {
		_, err := safetensors.SaveSharded(ctx, filepath.Join(out, "sharded"), saveTensors(gpu0), gpu0.Metadata,
			&safetensors.ShardOptions{MaxShardSize: 2_000_000_000})
		return err
	}})
	results := make([]stResult, len(configs))
	for i, c := range configs {
		results[i].Name = c.name
	}
	for rep := range o.repeats + o.warmup {
		for k := range configs {
			i := (k + rep) % len(configs)
			t0 := time.Now()
			if err := configs[i].run(); err != nil {
				return fmt.Errorf("%s: %w", configs[i].name, err)
			}
			if rep >= o.warmup {
				results[i].Seconds = append(results[i].Seconds, time.Since(t0).Seconds())
			}
			if err := clearDir(out); err != nil {
				return err
			}
		}
	}
	for i := range results {
		results[i].finish(size)
	}
	if o.json {
		return writeJSON(e.stdout, results)
	}
	fmt.Fprintf(e.stdout, "save of %s (%.2f GB, %d tensors) to new files in %s, %d repetitions taking turns; best (median)\n",
		name, float64(size)/1e9, len(gpu0.Tensors), o.dir, o.repeats)
	for _, r := range results {
		fmt.Fprintf(e.stdout, "  %-34s %8.3f s  %7.2f GB/s (%.2f)  %.2fx (%.2fx) %s\n",
			r.Name, r.Best, r.GBps, r.MedianGBps, results[0].Best/r.Best, results[0].Median/r.Median, results[0].Name)
	}
	return nil
}

// saveTensors returns the tensors of a loaded model for safetensors.Save:
// from device memory, or host memory for a host load.
func saveTensors(m *safetensors.Model) []safetensors.SaveTensor {
	ts := make([]safetensors.SaveTensor, len(m.Tensors))
	for i, t := range m.Tensors {
		ts[i] = safetensors.SaveTensor{Name: t.Name, Dtype: t.Dtype, Shape: t.Shape, Ptr: t.Ptr, Data: t.Data}
		if t.Ptr == 0 && t.Data == nil {
			ts[i].Data = []byte{} // an empty tensor
		}
	}
	return ts
}

// readWhole fills b from the start of the file at name.
func readWhole(name string, b []byte) error {
	f, err := kvik.Open(name, "r", 0)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := f.ReadAt(b, 0)
	if err == nil && n != len(b) {
		err = fmt.Errorf("%s: read %d of %d bytes", name, n, len(b))
	}
	return err
}

// clearDir removes everything in dir, keeping dir.
func clearDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
