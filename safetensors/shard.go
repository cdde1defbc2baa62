package safetensors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kvikgo/kvik"
	"golang.org/x/sync/errgroup"
)

// DefaultMaxShardSize is the shard size of SaveSharded when
// ShardOptions.MaxShardSize is 0: Hugging Face's default ("5GB").
const DefaultMaxShardSize = 5_000_000_000

// DefaultShardName is the name of SaveSharded's files when
// ShardOptions.Name is empty, as Hugging Face names a model's weights.
const DefaultShardName = "model"

// ShardOptions tunes SaveSharded; the zero value (or nil) is Hugging
// Face's layout with 5 GB shards.
type ShardOptions struct {
	// MaxShardSize is the most tensor bytes in one shard (headers not
	// counted), DefaultMaxShardSize when 0. A tensor larger than it gets
	// a shard of its own.
	MaxShardSize int64
	// Name is the files' base name: shards Name-00001-of-0000N.safetensors
	// and the index Name.safetensors.index.json; DefaultShardName when
	// empty. It must be a plain file name.
	Name string
	// Parallel is how many shards are written at once, 4 when 0. The
	// shards share kvik's workers; writing a few at once overlaps one
	// shard's commit (sync, rename) with the next one's writes.
	Parallel int
}

// ShardFileName returns the name of shard i (from 1) of n: Hugging Face's
// name-00001-of-00003.safetensors.
func ShardFileName(name string, i, n int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.safetensors", name, i, n)
}

// IndexFileName returns the name of the index of shards named name:
// name.safetensors.index.json.
func IndexFileName(name string) string { return name + ".safetensors.index.json" }

// SaveSharded writes tensors as a sharded checkpoint in dir, the layout
// Hugging Face uses and LoadIndex reads: the tensors, in the order given,
// fill shards of at most o.MaxShardSize bytes (a larger tensor gets a
// shard of its own), each shard a safetensors file written by Save with
// metadata in its header; then the index, whose "metadata" holds
// "total_size" (the tensors' bytes) and metadata's entries, and whose
// "weight_map" names each tensor's shard. It returns the index's path or
// URL, for LoadIndex.
//
// dir is a local directory, created if missing, whose files are saved
// with opts (kvik.WithoutSync), or an S3 prefix (s3://bucket/path/ or
// an S3 http(s) URL) uploaded to with opts. Tensors
// may live in host memory or on one or several GPUs, as for Save.
//
// Every shard is written atomically (kvik.SaveFile), several at once
// (o.Parallel), and the index last, atomically too, so a reader never
// finds an index naming a shard that is missing or incomplete. If any
// shard fails, or ctx is cancelled, no index is written and the shards
// this call already wrote are removed (best effort: a removal that fails
// is reported with the error, and a crash leaves them). Saving over an
// older checkpoint of the same name replaces its shards one by one and
// its index last: a reader that opened the old index meanwhile may find
// new shards, and on failure the old index may name removed shards; old
// shards of another shard count are left in place. Save to a new
// directory for a checkpoint that stays whole throughout.
func SaveSharded(ctx context.Context, dir string, tensors []SaveTensor, metadata map[string]string, o *ShardOptions, opts ...kvik.RemoteOption) (string, error) {
	so := ShardOptions{}
	if o != nil {
		so = *o
	}
	if so.MaxShardSize == 0 {
		so.MaxShardSize = DefaultMaxShardSize
	}
	if so.Name == "" {
		so.Name = DefaultShardName
	}
	if so.Parallel == 0 {
		so.Parallel = 4
	}
	fail := func(err error) (string, error) {
		return "", &fs.PathError{Op: "write", Path: redact(dir), Err: err}
	}
	switch {
	case so.MaxShardSize < 0 || so.Parallel < 0:
		return fail(fmt.Errorf("%w: MaxShardSize %d, Parallel %d", ErrInvalidArgument, so.MaxShardSize, so.Parallel))
	case !filepath.IsLocal(so.Name) || strings.ContainsAny(so.Name, `/\`) || strings.HasPrefix(so.Name, ".") || !utf8.ValidString(so.Name):
		return fail(fmt.Errorf("%w: shard name %q is not a plain file name in UTF-8", ErrInvalidArgument, so.Name))
	}
	shards, total, err := planShards(tensors, so.MaxShardSize)
	if err == nil {
		err = checkMetadata(metadata)
	}
	if err != nil {
		return fail(err)
	}
	dst, err := newShardDest(dir, opts)
	if err != nil {
		return fail(err)
	}
	defer dst.close()

	ix := Index{Metadata: map[string]json.RawMessage{}, WeightMap: map[string]string{}}
	for k, v := range metadata {
		b, _ := json.Marshal(v)
		ix.Metadata[k] = b
	}
	ix.Metadata["total_size"], _ = json.Marshal(total)
	names := make([]string, len(shards))
	for i, s := range shards {
		names[i] = ShardFileName(so.Name, i+1, len(shards))
		for _, t := range s {
			ix.WeightMap[tensors[t].Name] = names[i]
		}
	}
	index, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return fail(err)
	}
	index = append(index, '\n')

	// Write the shards, so.Parallel at once; the first failure cancels
	// the rest.
	g, sctx := errgroup.WithContext(ctx)
	g.SetLimit(so.Parallel)
	var (
		mu      sync.Mutex
		written []string
	)
	for i, s := range shards {
		if sctx.Err() != nil {
			break
		}
		g.Go(func() error {
			ts := make([]SaveTensor, len(s))
			for j, t := range s {
				ts[j] = tensors[t]
			}
			if err := dst.save(sctx, names[i], ts, metadata); err != nil {
				return err
			}
			mu.Lock()
			written = append(written, names[i])
			mu.Unlock()
			if shardWritten != nil {
				shardWritten(names[i])
			}
			return nil
		})
	}
	err = g.Wait()
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	if err == nil {
		err = dst.saveBytes(ctx, IndexFileName(so.Name), index)
	}
	if err != nil {
		// Remove what this call wrote, even when ctx is cancelled.
		rctx, stop := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer stop()
		var rerrs []error
		for _, n := range written {
			if rerr := dst.remove(rctx, n); rerr != nil {
				rerrs = append(rerrs, rerr)
			}
		}
		if len(rerrs) > 0 {
			err = fmt.Errorf("%w (and removing the shards written failed: %w)", err, errors.Join(rerrs...))
		}
		if _, ok := err.(*fs.PathError); !ok {
			return fail(err) // a cancellation, named after dir
		}
		return "", err
	}
	return dst.name(IndexFileName(so.Name)), nil
}

// shardWritten, when not nil, is called after each shard is written
// (tests cancel a save midway with it).
var shardWritten func(file string)

// planShards checks the tensors and puts them, in order, into shards of
// at most max bytes (a larger tensor alone), as Hugging Face does: a
// tensor that does not fit in the current shard starts the next. It
// returns the tensors' indices per shard and their total size.
func planShards(ts []SaveTensor, max int64) ([][]int, int64, error) {
	seen := make(tensorNames, len(ts))
	var shards [][]int
	var cur []int
	var curSize, total int64
	for i := range ts {
		t := &ts[i]
		if err := seen.add(t.Name); err != nil {
			return nil, 0, err
		}
		n, err := t.size()
		if err != nil {
			return nil, 0, err
		}
		total += n
		switch {
		case n > max:
			shards = append(shards, []int{i})
			continue
		case curSize+n > max && len(cur) > 0:
			shards = append(shards, cur)
			cur, curSize = nil, 0
		}
		cur = append(cur, i)
		curSize += n
	}
	if len(cur) > 0 || len(shards) == 0 {
		shards = append(shards, cur) // no tensors: one empty shard
	}
	return shards, total, nil
}

// shardDest is where SaveSharded writes: a local directory or an S3
// prefix.
type shardDest struct {
	dir    string
	prefix *kvik.RemotePrefix  // nil for a local directory
	opts   []kvik.RemoteOption // a local directory's saves' (kvik.WithoutSync)
}

func newShardDest(dir string, opts []kvik.RemoteOption) (*shardDest, error) {
	if !kvik.IsURL(dir) {
		if err := kvik.MkdirAll(dir, 0o777, opts...); err != nil {
			return nil, pathErrInner(err)
		}
		return &shardDest{dir: dir, opts: opts}, nil
	}
	p, err := kvik.NewRemotePrefix(dir, opts...)
	if err != nil {
		return nil, pathErrInner(err)
	}
	if p.EndpointType() == kvik.RemoteHTTP {
		p.Close()
		return nil, fmt.Errorf("%w: %w: a plain HTTP prefix is read-only", ErrInvalidArgument, errors.ErrUnsupported)
	}
	return &shardDest{dir: dir, prefix: p}, nil
}

func (d *shardDest) name(file string) string {
	if d.prefix != nil {
		return d.prefix.URL(file)
	}
	return filepath.Join(d.dir, file)
}

func (d *shardDest) save(ctx context.Context, file string, ts []SaveTensor, meta map[string]string) error {
	ps, err := Encode(ts, meta)
	if err != nil {
		return &fs.PathError{Op: "write", Path: redact(d.name(file)), Err: err}
	}
	return d.savePieces(ctx, file, ps)
}

func (d *shardDest) saveBytes(ctx context.Context, file string, b []byte) error {
	return d.savePieces(ctx, file, []kvik.Piece{{Data: b}})
}

func (d *shardDest) savePieces(ctx context.Context, file string, ps []kvik.Piece) error {
	if d.prefix != nil {
		return d.prefix.Save(ctx, file, ps)
	}
	return kvik.SaveFile(ctx, d.name(file), ps, d.opts...)
}

func (d *shardDest) remove(ctx context.Context, file string) error {
	if d.prefix != nil {
		return d.prefix.Delete(ctx, file)
	}
	return os.Remove(d.name(file))
}

func (d *shardDest) close() {
	if d.prefix != nil {
		d.prefix.Close()
	}
}

// pathErrInner returns the error a *fs.PathError wraps, for errors that
// are named again after the checkpoint's directory.
func pathErrInner(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
