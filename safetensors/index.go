package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Index is a sharded checkpoint's *.safetensors.index.json: which file
// holds each tensor.
type Index struct {
	Metadata  map[string]json.RawMessage `json:"metadata"`
	WeightMap map[string]string          `json:"weight_map"`
}

// ReadIndex reads and checks an index file: every file it names must be a
// plain relative path in the index's directory tree.
func ReadIndex(path string) (*Index, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ix Index
	if err := json.Unmarshal(b, &ix); err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %v", ErrInvalidIndex, err)}
	}
	if ix.WeightMap == nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: no weight_map", ErrInvalidIndex)}
	}
	for name, file := range ix.WeightMap {
		if !filepath.IsLocal(file) || strings.ContainsRune(file, '\\') {
			return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: tensor %q names file %q outside the index's directory", ErrInvalidIndex, name, file)}
		}
	}
	return &ix, nil
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
// that its shard lacks is an error matching ErrNotFound.
func LoadIndex(path string, o *Options) (*Model, error) {
	return loadIndex(path, o, false)
}

// LoadIndexHost is LoadIndex into host memory.
func LoadIndexHost(path string, o *Options) (*Model, error) {
	return loadIndex(path, o, true)
}

func loadIndex(path string, o *Options, host bool) (*Model, error) {
	ix, err := ReadIndex(path)
	if err != nil {
		return nil, err
	}
	if o == nil {
		o = &Options{}
	}
	for _, n := range o.Names {
		if _, ok := ix.WeightMap[n]; !ok {
			return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %q", ErrNotFound, n)}
		}
	}
	want := map[string]bool{}
	for _, n := range o.Names {
		want[n] = true
	}
	all := &Model{byName: map[string]int{}, Metadata: map[string]string{}}
	for k, v := range ix.Metadata {
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v) // a number or other JSON value, as written
		}
		all.Metadata[k] = s
	}
	dir := filepath.Dir(path)
	files := ix.Files()
	models := make([]*Model, len(files))
	errs := make([]error, len(files))
	var wg sync.WaitGroup
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
		// Shards load concurrently; each is one parallel read per device.
		wg.Go(func() { models[i], errs[i] = load(filepath.Join(dir, file), &so, host) })
	}
	wg.Wait()
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
	if err := errors.Join(errs...); err != nil {
		all.Close()
		return nil, err
	}
	return all, nil
}
