package zarr

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
)

// ArrayPaths returns the paths of the arrays in s, sorted: from a listing
// where the store has one, else (a plain HTTP store) from its
// consolidated metadata, else the root if it is an array.
func ArrayPaths(ctx context.Context, s Store) ([]string, error) {
	keys, err := s.List(ctx, "")
	if errors.Is(err, errors.ErrUnsupported) {
		if keys, err = consolidatedKeys(s), nil; keys == nil {
			if _, err := readMetadata(ctx, s, ""); err != nil {
				return nil, err
			}
			return []string{""}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, k := range keys {
		dir, base := "", k
		if i := strings.LastIndexByte(k, '/'); i >= 0 {
			dir, base = k[:i], k[i+1:]
		}
		switch base {
		case ".zarray":
		case "zarr.json":
			if !isArrayDoc(ctx, s, k) {
				continue
			}
		default:
			continue
		}
		paths = append(paths, dir)
	}
	sort.Strings(paths)
	return paths, nil
}

// isArrayDoc reports whether the zarr.json at key describes an array.
func isArrayDoc(ctx context.Context, s Store, key string) bool {
	var b []byte
	if cs, ok := s.(consolidatedStore); ok {
		b, _ = cs.cached(key)
	}
	if b == nil {
		var err error
		if b, err = s.Get(ctx, key, nil); err != nil {
			return false
		}
	}
	var doc struct {
		NodeType string `json:"node_type"`
	}
	return json.Unmarshal(b, &doc) == nil && doc.NodeType == "array"
}

// consolidatedKeys returns the metadata keys a store's consolidated
// metadata holds, nil if it has none.
func consolidatedKeys(s Store) []string {
	rs, ok := s.(*RemoteStore)
	if !ok {
		return nil
	}
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	if rs.meta == nil {
		return nil
	}
	keys := make([]string, 0, len(rs.meta))
	for k := range rs.meta {
		keys = append(keys, k)
	}
	return keys
}
