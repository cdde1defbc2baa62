package torch

import (
	"context"
	"fmt"
	"io/fs"
	"slices"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/safetensors"
	"golang.org/x/sync/errgroup"
)

// LoadIndex loads a sharded checkpoint, pytorch_model.bin.index.json
// and the shards it names beside it (as Hugging Face's save_pretrained
// writes them without safetensors), as one Checkpoint: each shard's
// selected tensors (those its weight_map entry names, filtered by o) are
// read as by Load, all shards at once, each with its own allocation per
// device (o.Place and balanced placement apply per shard). A tensor the
// index names that its shard lacks is an error matching ErrNotFound.
// The index is read and checked as safetensors.ReadIndex does: every
// shard a plain relative path in the index's directory. name is a local
// path or a URL, opened with opts as the shards are. Cancelling ctx
// stops every shard's load.
func LoadIndex(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Checkpoint, error) {
	return loadIndex(ctx, name, o, false, opts)
}

// LoadIndexHost is LoadIndex into host memory.
func LoadIndexHost(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Checkpoint, error) {
	return loadIndex(ctx, name, o, true, opts)
}

func loadIndex(ctx context.Context, name string, o *Options, host bool, opts []kvik.RemoteOption) (*Checkpoint, error) {
	ix, err := safetensors.ReadIndex(ctx, name, opts...)
	if err != nil {
		return nil, err
	}
	if o == nil {
		o = &Options{}
	}
	want := map[string]bool{}
	for _, n := range o.Names {
		if _, ok := ix.WeightMap[n]; !ok {
			return nil, &fs.PathError{Op: "read", Path: kvik.RedactURL(name), Err: fmt.Errorf("%w: %q", ErrNotFound, n)}
		}
		want[n] = true
	}
	files := ix.Files()
	parts := make([]*Checkpoint, len(files))
	// The first shard to fail cancels the others, and is the error.
	g, gctx := errgroup.WithContext(ctx)
	for i, file := range files {
		var names []string
		for n, f := range ix.WeightMap {
			if f == file && (len(want) == 0 || want[n]) {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			continue
		}
		slices.Sort(names)
		so := *o
		so.Names = names
		shard, _ := safetensors.ShardName(name, file) // checked by ReadIndex
		g.Go(func() (err error) {
			if host {
				parts[i], err = LoadHost(gctx, shard, &so, opts...)
			} else {
				parts[i], err = Load(gctx, shard, &so, opts...)
			}
			return err
		})
	}
	first := g.Wait()
	all := &Checkpoint{byName: map[string]int{}}
	for _, c := range parts {
		if c == nil {
			continue
		}
		for _, t := range c.Tensors {
			all.byName[t.Name] = len(all.Tensors)
			all.Tensors = append(all.Tensors, t)
		}
		all.Skipped = append(all.Skipped, c.Skipped...)
		all.mems = append(all.mems, c.mems...)
	}
	if first != nil {
		all.Close()
		return nil, first
	}
	return all, nil
}
