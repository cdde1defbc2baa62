package safetensors

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/formatkit/tensorload"
)

// Index is a sharded checkpoint's *.safetensors.index.json: which file
// holds each tensor.
type Index struct {
	Metadata  map[string]json.RawMessage `json:"metadata"`
	WeightMap map[string]string          `json:"weight_map"`
}

// MaxIndexSize bounds an index file, so a hostile one never causes a
// huge allocation.
const MaxIndexSize = 64 << 20

// ReadIndex reads and checks the index file at name, a local path or a
// URL opened with opts: every file it names must be a plain relative path
// in the index's directory tree, and shard names resolve against the
// index's own path or URL (see ShardName).
func ReadIndex(ctx context.Context, name string, opts ...kvik.RemoteOption) (*Index, error) {
	b, err := readSmall(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	var ix Index
	if err := decodeIndex(b, &ix); err != nil {
		return nil, &fs.PathError{Op: "read", Path: redact(name), Err: fmt.Errorf("%w: %v", ErrInvalidIndex, err)}
	}
	if ix.WeightMap == nil {
		return nil, &fs.PathError{Op: "read", Path: redact(name), Err: fmt.Errorf("%w: no weight_map", ErrInvalidIndex)}
	}
	for tensor, file := range ix.WeightMap {
		if _, err := ShardName(name, file); err != nil {
			return nil, &fs.PathError{Op: "read", Path: redact(name), Err: fmt.Errorf("tensor %q: %w", tensor, err)}
		}
	}
	return &ix, nil
}

// decodeIndex decodes an index's JSON into ix. The tokenizer checks it
// first (jsontext, as the header's parse): a name twice in one object,
// which encoding/json would merge into one weight_map entry, losing a
// tensor, and invalid UTF-8, which it would turn into U+FFFD, making
// names up, are refused.
func decodeIndex(b []byte, ix *Index) error {
	if _, err := jsontext.NewDecoder(bytes.NewReader(b)).ReadValue(); err != nil {
		return err
	}
	return json.Unmarshal(b, ix)
}

// readSmall reads the whole file at name, of at most MaxIndexSize bytes.
func readSmall(ctx context.Context, name string, opts []kvik.RemoteOption) ([]byte, error) {
	return tensorload.Open(ctx, name, opts, func(r kvik.Reader) ([]byte, error) {
		size, err := r.Size()
		if err != nil {
			return nil, err
		}
		if size > MaxIndexSize {
			return nil, tensorload.PathError(r, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidIndex, size, MaxIndexSize))
		}
		b := make([]byte, size)
		if err := readFull(tensorload.ReaderAt(ctx, r), b, 0); err != nil {
			return nil, tensorload.PathError(r, err)
		}
		return b, nil
	})
}

// ShardName returns where the shard file named in the index at index
// lies: beside the index, in its directory or the URL's. file must be a
// plain relative path below that directory (no "..", no absolute path,
// no URL of its own): a hostile index cannot make a load read anything
// else. Other names fail with ErrInvalidIndex.
func ShardName(index, file string) (string, error) {
	if !filepath.IsLocal(file) || strings.ContainsRune(file, '\\') || kvik.IsURL(file) {
		return "", fmt.Errorf("%w: file %q is outside the index's directory", ErrInvalidIndex, file)
	}
	// Nor may it leave once percent-decoded ("%2e%2e/x"), by a server
	// or a proxy that decodes the path it is sent.
	if dec, err := url.PathUnescape(file); err == nil && (!filepath.IsLocal(dec) || strings.ContainsRune(dec, '\\')) {
		return "", fmt.Errorf("%w: file %q is outside the index's directory once percent-decoded", ErrInvalidIndex, file)
	}
	if !kvik.IsURL(index) {
		return filepath.Join(filepath.Dir(index), file), nil
	}
	base, err := url.Parse(index)
	if err != nil {
		return "", fmt.Errorf("%w: index URL: %v", ErrInvalidIndex, err)
	}
	// As a path, file cannot carry a scheme, host, query or fragment.
	u := base.ResolveReference(&url.URL{Path: path.Clean(file)})
	dir := path.Dir(base.Path)
	if u.Scheme != base.Scheme || u.Host != base.Host || u.User.String() != base.User.String() ||
		!strings.HasPrefix(u.Path, strings.TrimSuffix(dir, "/")+"/") {
		return "", fmt.Errorf("%w: file %q resolves to %s, outside the index's directory", ErrInvalidIndex, file, kvik.RedactURL(u.String()))
	}
	return u.String(), nil
}

// redact returns name fit for an error (kvik.RedactURL): no password,
// no query, which may hold a signature.
func redact(name string) string { return kvik.RedactURL(name) }

// StringMetadata returns the index's metadata with each value as a
// string: JSON strings unquoted, other values (numbers…) as written.
func (ix *Index) StringMetadata() map[string]string {
	m := make(map[string]string, len(ix.Metadata))
	for k, v := range ix.Metadata {
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v)
		}
		m[k] = s
	}
	return m
}

// Files returns the index's shard files, sorted.
func (ix *Index) Files() []string {
	var fs []string
	for _, f := range ix.WeightMap {
		if !slices.Contains(fs, f) {
			fs = append(fs, f)
		}
	}
	slices.Sort(fs)
	return fs
}

// LoadIndex loads a sharded checkpoint as one Model: each shard's selected
// tensors (those its weight_map entry names, filtered by o) are read as by
// Load, all shards at once. Each shard has its own allocation per device;
// o.Place and balanced placement apply per shard. A tensor the index names
// that its shard lacks is an error matching ErrNotFound. name is a local
// path or a URL, opened with opts as the shards are; shard files lie
// beside the index (ShardName). Cancelling ctx stops every shard's load.
func LoadIndex(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Model, error) {
	return loadIndex(ctx, name, o, false, opts)
}

// LoadIndexHost is LoadIndex into host memory.
func LoadIndexHost(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Model, error) {
	return loadIndex(ctx, name, o, true, opts)
}

func loadIndex(ctx context.Context, name string, o *Options, host bool, opts []kvik.RemoteOption) (*Model, error) {
	ix, err := ReadIndex(ctx, name, opts...)
	if err != nil {
		return nil, err
	}
	if o == nil {
		o = &Options{}
	}
	for _, n := range o.Names {
		if _, ok := ix.WeightMap[n]; !ok {
			return nil, &fs.PathError{Op: "read", Path: redact(name), Err: fmt.Errorf("%w: %q", ErrNotFound, n)}
		}
	}
	want := map[string]bool{}
	for _, n := range o.Names {
		want[n] = true
	}
	all := &Model{byName: map[string]int{}, Metadata: ix.StringMetadata()}
	// Shards load concurrently, each one parallel read per device; the
	// first to fail cancels the others: a failed load neither waits for
	// nor pays for the rest of the checkpoint.
	models, first := tensorload.Shards(ctx, ix.Files(), ix.WeightMap, want, func(ctx context.Context, file string, names []string) (*Model, error) {
		so := *o
		so.Names = names
		shard, _ := ShardName(name, file) // checked by ReadIndex
		return load(ctx, shard, &so, host, opts)
	})
	for _, m := range models {
		if m == nil {
			continue
		}
		for _, t := range m.Tensors {
			all.byName[t.Name] = len(all.Tensors)
			all.Tensors = append(all.Tensors, t)
		}
		all.mems = append(all.mems, m.mems...)
	}
	if first != nil {
		all.Close()
		return nil, first
	}
	return all, nil
}
