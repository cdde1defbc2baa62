package zarr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/kvikgo/kvik"
)

// consolidatedV3 is the consolidated_metadata member of a v3 group
// document, in zarr-python's layout.
type consolidatedV3 struct {
	Kind           string                     `json:"kind"`
	MustUnderstand bool                       `json:"must_understand"`
	Metadata       map[string]json.RawMessage `json:"metadata"`
}

// Consolidate writes the consolidated metadata of s, as zarr-python's
// consolidate_metadata does, so that readers (OpenURL, zarr-python's
// open_consolidated) open every array of the store from one document:
//
//   - Zarr v2: .zmetadata holds every .zgroup, .zarray and .zattrs
//     document of the store by key ({"metadata": {...},
//     "zarr_consolidated_format": 1});
//   - Zarr v3: the root zarr.json, a group, gets consolidated_metadata of
//     kind "inline" holding every other zarr.json by path, its other
//     fields kept. A root that is an array has nothing to consolidate.
//
// A store with both gets both. Call it after writing metadata: the
// consolidated copy is not kept up to date by writes. It lists the store,
// so a plain HTTP RemoteStore fails with errors.ErrUnsupported. A document
// that is not a JSON object fails with ErrInvalidMetadata naming its key,
// nested v3 documents under no root zarr.json and a store with no
// metadata fail with an error matching fs.ErrNotExist; nothing is written
// then. A consolidated document longer than the store's readers accept
// (MaxDocumentSize: WithMaxDocumentSize, default
// kvik.DefaultMaxDocumentSize) fails with kvik.ErrTooLarge, and nothing
// is written either. Output is deterministic (sorted keys). On a
// RemoteStore, the store's in-memory consolidated copy is reloaded
// afterwards.
func Consolidate(ctx context.Context, s Store) error {
	if err := consolidate(ctx, s); err != nil {
		return fmt.Errorf("consolidate: %w", err)
	}
	if rs, ok := s.(*RemoteStore); ok {
		return rs.loadConsolidated(ctx)
	}
	return nil
}

func consolidate(ctx context.Context, s Store) error {
	keys, err := s.List(ctx, "")
	if err != nil {
		return err
	}
	var v2, v3 []string
	for _, k := range keys {
		switch k[strings.LastIndexByte(k, '/')+1:] {
		case ".zgroup", ".zarray", ".zattrs":
			v2 = append(v2, k)
		case "zarr.json":
			v3 = append(v3, k)
		}
	}
	if len(v2)+len(v3) == 0 {
		return fmt.Errorf("no metadata documents: %w", fs.ErrNotExist)
	}
	docs, err := getDocs(ctx, s, append(v2, v3...))
	if err != nil {
		return err
	}
	// Both documents are made, and checked, before either is written.
	var zmetadata, root []byte
	if len(v2) > 0 {
		if zmetadata, err = consolidateV2(v2, docs); err != nil {
			return err
		}
	}
	if len(v3) > 0 {
		if root, err = consolidateV3(v3, docs); err != nil {
			return err
		}
	}
	limit := maxDocument(s)
	for _, d := range []struct {
		key string
		doc []byte
	}{{".zmetadata", zmetadata}, {"zarr.json", root}} {
		if int64(len(d.doc)) > limit {
			return fmt.Errorf("%w: %s of %d bytes, over the store's %d-byte document limit (WithMaxDocumentSize); nothing written", kvik.ErrTooLarge, d.key, len(d.doc), limit)
		}
	}
	if zmetadata != nil {
		if err := s.Set(ctx, ".zmetadata", zmetadata); err != nil {
			return err
		}
	}
	if root != nil {
		return s.Set(ctx, "zarr.json", root)
	}
	return nil
}

// maxDocument returns the cap on s's metadata documents: what its
// readers accept.
func maxDocument(s Store) int64 {
	if m, ok := s.(interface{ MaxDocumentSize() int64 }); ok {
		return m.MaxDocumentSize()
	}
	return kvik.DefaultMaxDocumentSize
}

// getDocs reads the documents at keys concurrently; a key deleted since
// the listing is left out.
func getDocs(ctx context.Context, s Store, keys []string) (map[string][]byte, error) {
	vals := make([][]byte, len(keys))
	err := parallel(ctx, len(keys), storeWorkers(s), func(ctx context.Context, _, i int) (err error) {
		vals[i], err = s.Get(ctx, keys[i], nil)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	docs := make(map[string][]byte, len(keys))
	for i, k := range keys {
		if vals[i] != nil {
			docs[k] = vals[i]
		}
	}
	return docs, nil
}

// jsonObject parses the document at key as a JSON object.
func jsonObject(key string, b []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%w: %s is not a JSON object: %v", ErrInvalidMetadata, key, err)
	}
	return m, nil
}

// consolidateV2 returns the .zmetadata document of the v2 documents at
// keys.
func consolidateV2(keys []string, docs map[string][]byte) ([]byte, error) {
	meta := make(map[string]json.RawMessage, len(keys))
	for _, k := range keys {
		b, ok := docs[k]
		if !ok {
			continue
		}
		if _, err := jsonObject(k, b); err != nil {
			return nil, err
		}
		meta[k] = b
	}
	return marshalJSON(struct {
		Metadata map[string]json.RawMessage `json:"metadata"`
		Format   int                        `json:"zarr_consolidated_format"`
	}{meta, 1}, "    ")
}

// consolidateV3 returns the root zarr.json with consolidated_metadata
// holding the other zarr.json documents at keys, nil if the root is an
// array. Nested groups carry the empty marker zarr-python writes
// ({"kind": "inline", "must_understand": false, "metadata": {}}): their
// members are listed flat in the root's.
func consolidateV3(keys []string, docs map[string][]byte) ([]byte, error) {
	rootBytes, ok := docs["zarr.json"]
	if !ok {
		return nil, fmt.Errorf("zarr.json: no root group for %d v3 documents: %w", len(keys), fs.ErrNotExist)
	}
	root, err := jsonObject("zarr.json", rootBytes)
	if err != nil {
		return nil, err
	}
	switch nodeType(root) {
	case "array":
		return nil, nil
	case "group":
		if err := checkExtensions("zarr.json", root, v3GroupFields); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: zarr.json: node_type %s", ErrInvalidMetadata, root["node_type"])
	}
	meta := map[string]json.RawMessage{}
	for _, k := range keys {
		b, ok := docs[k]
		if !ok || k == "zarr.json" {
			continue
		}
		doc, err := jsonObject(k, b)
		if err != nil {
			return nil, err
		}
		if nodeType(doc) == "group" {
			if err := checkExtensions(k, doc, v3GroupFields); err != nil {
				return nil, err
			}
			if b, err = withConsolidated(doc, map[string]json.RawMessage{}); err != nil {
				return nil, err
			}
		}
		meta[strings.TrimSuffix(k, "/zarr.json")] = b
	}
	b, err := withConsolidated(root, meta)
	if err != nil {
		return nil, err
	}
	return marshalJSON(json.RawMessage(b), "  ")
}

func nodeType(doc map[string]json.RawMessage) string {
	var t string
	json.Unmarshal(doc["node_type"], &t)
	return t
}

// withConsolidated returns group document doc with its
// consolidated_metadata set to meta.
func withConsolidated(doc map[string]json.RawMessage, meta map[string]json.RawMessage) ([]byte, error) {
	c, err := marshalJSON(consolidatedV3{Kind: "inline", Metadata: meta}, "")
	if err != nil {
		return nil, err
	}
	doc["consolidated_metadata"] = c
	return marshalJSON(doc, "")
}
