package torch

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/formatkit/tensorload"
	"github.com/kvikgo/kvik/safetensors"
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
	parts, first := tensorload.Shards(ctx, ix.Files(), ix.WeightMap, want, func(ctx context.Context, file string, names []string) (*Checkpoint, error) {
		so := *o
		so.Names = names
		shard, _ := safetensors.ShardName(name, file) // checked by ReadIndex
		if host {
			return LoadHost(ctx, shard, &so, opts...)
		}
		return Load(ctx, shard, &so, opts...)
	})
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
