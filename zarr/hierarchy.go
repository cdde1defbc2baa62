package zarr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"slices"
	"sort"
	"strings"
)

// ArrayPaths returns the paths of the arrays in s, sorted: from a listing
// where the store has one, else (a plain HTTP store) from its
// consolidated metadata, else the root if it is an array. As in
// zarr-python's hierarchy, an array below the root is listed only when
// every node above it, root included, is a group of the array's format
// (a .zgroup for a v2 array, a zarr.json group for a v3 one): arrays
// under a plain directory are left out.
//
// A store with no metadata document at its root (a mistyped path, an
// empty or plain directory) fails with ErrNoStore. A zarr.json that
// cannot be read, or is not a JSON object naming node_type "array" or
// "group", fails with an error naming its key (ErrInvalidMetadata for a
// corrupt one), rather than leaving its node out.
func ArrayPaths(ctx context.Context, s Store) ([]string, error) {
	keys, err := s.List(ctx, "")
	if errors.Is(err, errors.ErrUnsupported) {
		if keys, err = consolidatedKeys(s), nil; keys == nil {
			if _, err := readMetadata(ctx, s, ""); absent(err) {
				return nil, fmt.Errorf("%w (%w)", ErrNoStore, err)
			} else if err != nil {
				return nil, err
			}
			return []string{""}, nil
		}
	} else if err == nil && !slices.ContainsFunc(keys, isRootDoc) {
		return nil, ErrNoStore
	}
	if err != nil {
		return nil, err
	}
	// By node, whether it holds an array or a group of format 2 and 3.
	arrays := map[string][2]bool{}
	groups := map[string][2]bool{}
	for _, k := range keys {
		dir, base := "", k
		if i := strings.LastIndexByte(k, '/'); i >= 0 {
			dir, base = k[:i], k[i+1:]
		}
		a, g := arrays[dir], groups[dir]
		switch base {
		case ".zgroup":
			g[0] = true
		case ".zarray":
			a[0] = true
		case "zarr.json":
			t, err := nodeTypeAt(ctx, s, k)
			if err != nil {
				return nil, err
			}
			switch t {
			case "array":
				a[1] = true
			case "group":
				g[1] = true
			}
		default:
			continue
		}
		arrays[dir], groups[dir] = a, g
	}
	var paths []string
	for dir, formats := range arrays {
		for f, isArray := range formats {
			ok := isArray
			for _, p := range parentPrefixes(keyPrefix(dir)) {
				ok = ok && groups[strings.TrimSuffix(p, "/")][f]
			}
			if ok {
				paths = append(paths, dir)
				break
			}
		}
	}
	sort.Strings(paths)
	return paths, nil
}

// nodeTypeAt returns the node_type of the zarr.json at key: "array" or
// "group", "" for a document deleted since the listing.
func nodeTypeAt(ctx context.Context, s Store, key string) (string, error) {
	var b []byte
	if cs, ok := s.(consolidatedStore); ok {
		b, _ = cs.cached(key)
	}
	if b == nil {
		var err error
		if b, err = s.Get(ctx, key, nil); errors.Is(err, fs.ErrNotExist) {
			return "", nil
		} else if err != nil {
			return "", err
		}
	}
	doc, err := jsonObject(key, b)
	if err != nil {
		return "", err
	}
	switch t := nodeType(doc); t {
	case "array", "group":
		return t, nil
	case "":
		return "", fmt.Errorf("%w: %s: no node_type string", ErrInvalidMetadata, key)
	default:
		return "", fmt.Errorf("%w: %s: node_type %.40q (want \"array\" or \"group\")", ErrInvalidMetadata, key, t)
	}
}

// isRootDoc reports whether key is a metadata document at a store's root.
func isRootDoc(key string) bool {
	return !strings.Contains(key, "/") && IsMetadataKey(key)
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

// groupDocs are the documents Create writes for a missing parent group,
// by format: zarr-python's field set, indented as the array documents.
var groupDocs = map[int]struct {
	key string
	doc []byte
}{
	2: {".zgroup", []byte("{\n    \"zarr_format\": 2\n}\n")},
	3: {"zarr.json", []byte("{\n  \"attributes\": {},\n  \"node_type\": \"group\",\n  \"zarr_format\": 3\n}\n")},
}

// parentPrefixes returns the key prefixes of the groups above the node
// at prefix, root first: "", "g/", "g/h/" for "g/h/a/".
func parentPrefixes(prefix string) []string {
	if prefix == "" {
		return nil
	}
	parents := []string{""}
	for i := 0; i < len(prefix)-1; i++ {
		if prefix[i] == '/' {
			parents = append(parents, prefix[:i+1])
		}
	}
	return parents
}

// createParents writes a group document of format f for each parent of
// the node at prefix that lacks one, root first, so that zarr-python,
// which wants a document for every group, can open the hierarchy. It
// checks every parent before writing any: one that holds an array fails
// with ErrInvalidMetadata. Group documents there are kept as they are.
func createParents(ctx context.Context, s Store, f int, prefix string) error {
	parents := parentPrefixes(prefix)
	missing := make([]bool, len(parents))
	errs := make([]error, len(parents))
	err := parallel(ctx, len(parents), storeWorkers(s), func(ctx context.Context, _, i int) error {
		missing[i], errs[i] = groupMissing(ctx, s, f, parents[i])
		return nil
	})
	if err != nil {
		return err
	}
	for _, err := range errs { // the topmost parent's, whichever came first
		if err != nil {
			return err
		}
	}
	g := groupDocs[f]
	for i, p := range parents {
		if missing[i] {
			if err := s.Set(ctx, p+g.key, g.doc); err != nil {
				return err
			}
		}
	}
	return nil
}

// groupMissing reports whether the node at prefix lacks a group document
// of format f, failing if it holds an array of either format. A group in
// the store's consolidated metadata is taken as present without a
// request; one missing there is looked up, as the copy may be stale.
func groupMissing(ctx context.Context, s Store, f int, prefix string) (bool, error) {
	if cs, ok := s.(consolidatedStore); ok {
		if b, ok := cs.cached(prefix + groupDocs[f].key); ok && f == 2 {
			return false, nil
		} else if ok && docNodeType(b) == "group" {
			return false, groupExtensions(prefix+groupDocs[f].key, b)
		}
	}
	names := []string{"zarr.json", ".zarray"}
	if f == 2 {
		names = []string{".zgroup", ".zarray", "zarr.json"}
	}
	for _, name := range names {
		b, err := s.Get(ctx, prefix+name, nil)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, err
		}
		t := "array"
		switch name {
		case ".zgroup":
			return false, nil
		case "zarr.json":
			t = docNodeType(b)
		}
		switch {
		case t == "array":
			return false, fmt.Errorf("%w: %s: an array where a parent group belongs", ErrInvalidMetadata, prefix+name)
		case f == 3 && t == "group":
			return false, groupExtensions(prefix+name, b)
		case f == 3:
			return false, fmt.Errorf("%w: %s: node_type %q where a parent group belongs", ErrInvalidMetadata, prefix+name, t)
		}
	}
	return true, nil
}

// groupExtensions refuses a v3 group document at key with a field that
// must be understood: no array is created in a group this package does
// not understand.
func groupExtensions(key string, b []byte) error {
	var doc map[string]json.RawMessage
	json.Unmarshal(b, &doc) // a group by its node_type: an object
	return checkExtensions(key, doc, v3GroupFields)
}

// docNodeType returns the node_type of a zarr.json document, "" if it
// names none or is no JSON object.
func docNodeType(b []byte) string {
	var doc struct {
		NodeType string `json:"node_type"`
	}
	json.Unmarshal(b, &doc)
	return doc.NodeType
}

// storeWorkers returns how many requests to make at once on s: its
// MaxRequests where it has a bound, else GOMAXPROCS.
func storeWorkers(s Store) int {
	if slots, ok := requestSlots(s); ok {
		return slots
	}
	return runtime.GOMAXPROCS(0)
}

// nodeAbsent fails with ErrExists where prefix holds an array or a group
// document. The documents decide, not the store's consolidated metadata,
// which may be stale.
func nodeAbsent(ctx context.Context, s Store, prefix string) error {
	names := []string{"zarr.json", ".zarray", ".zgroup"}
	found := make([]bool, len(names))
	err := parallel(ctx, len(names), storeWorkers(s), func(ctx context.Context, _, i int) error {
		_, err := s.Get(ctx, prefix+names[i], nil)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		found[i] = err == nil
		return err
	})
	if err != nil {
		return err
	}
	for i, f := range found {
		if f {
			return fmt.Errorf("%w: %s", ErrExists, prefix+names[i])
		}
	}
	return nil
}

// Delete removes the array or group at path and everything below it:
// every key of the store under path (the whole store for ""), metadata
// documents last, so that a Delete cut short leaves nodes that still
// exist (Create fails there with ErrExists), never chunks without
// metadata that a new array would read as its own. A DirStore's
// directories left empty go too (see DirStore.prune). Deleting a path with
// nothing under it is not an error; a path no key may lie under ("..",
// an empty segment) fails with ErrInvalidKey. Consolidated metadata
// above path (.zmetadata) is not rewritten: consolidate again. Stores
// that cannot list (plain HTTP) fail with errors.ErrUnsupported.
func Delete(ctx context.Context, s Store, path string) error {
	prefix := keyPrefix(path)
	if err := checkPrefix(prefix); err != nil {
		return err
	}
	keys, err := s.List(ctx, prefix)
	if err != nil {
		return err
	}
	var docs, rest []string
	for _, k := range keys {
		if IsMetadataKey(k) {
			docs = append(docs, k)
		} else {
			rest = append(rest, k)
		}
	}
	for _, ks := range [][]string{rest, docs} {
		err := parallel(ctx, len(ks), storeWorkers(s), func(ctx context.Context, _, i int) error { return s.Delete(ctx, ks[i]) })
		if err != nil {
			return fmt.Errorf("delete %q: %w", path, err)
		}
	}
	if d, ok := s.(*DirStore); ok {
		if err := d.prune(ctx, prefix); err != nil {
			return fmt.Errorf("delete %q: %w", path, err)
		}
	}
	return nil
}

// checkPrefix fails with ErrInvalidKey where prefix (of keyPrefix)
// names no path a key may lie under: listing it would find nothing, and
// a Delete of it would seem to succeed.
func checkPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return checkKey(strings.TrimSuffix(prefix, "/"))
}
