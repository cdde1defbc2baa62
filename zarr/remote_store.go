package zarr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// RemoteStore is a Zarr store under a URL prefix: an S3 prefix
// (s3://bucket/path/store.zarr, or an S3 http(s) URL), read and written,
// or a plain HTTP(S) prefix, read-only. Each key is one object; reads
// are GETs, of whole objects or byte ranges (shard indexes and inner
// chunks), never preceded by a HEAD. A missing object (HTTP 404,
// NoSuchKey) is a missing key, which arrays read as the fill value; any
// other failure (403, 5xx after retries, a reset or a short body) is an
// error. Writes are single PUTs (or multipart uploads), atomic on S3.
//
// Requests are retried under kvik's HTTP settings (Defaults). At most
// MaxRequests of them are in flight at once per store. Consolidated
// metadata (.zmetadata, or consolidated_metadata in the root zarr.json),
// when the store has it, answers Open without further requests;
// Consolidate writes it.
//
// A RemoteStore is safe for concurrent use.
type RemoteStore struct {
	p   *kvik.RemotePrefix
	sem chan struct{} // one token per request in flight
	storeConfig
	// meta holds the documents of consolidated metadata by key, nil when
	// the store has none.
	mu   sync.RWMutex
	meta map[string][]byte
}

var _ Store = (*RemoteStore)(nil)

// DefaultMaxRequests is how many requests a RemoteStore keeps in flight
// when WithMaxRequests does not say: kvik's worker count
// (Defaults.NumThreads, KVIKIO_NTHREADS), at least MinRemoteRequests, at
// most the process-wide cap on remote requests
// (Defaults.RemoteMaxRequests, KVIKIO_REMOTE_IO_MAX_CONCURRENT_REQUESTS),
// which every request also waits for. A read keeps fewer in flight where
// its chunks are large (see Array.ReadRegion).
func DefaultMaxRequests() int {
	d, err := kvik.GetDefaults()
	if err != nil {
		return max(kvik.DefaultNumThreads(), MinRemoteRequests)
	}
	n := max(d.NumThreads, MinRemoteRequests)
	if d.RemoteMaxRequests > 0 {
		n = min(n, d.RemoteMaxRequests)
	}
	return n
}

// MinRemoteRequests is the fewest requests DefaultMaxRequests keeps in
// flight, whatever the worker count: a distant S3 answers each GET after
// 10-30 ms, during which a request moves nothing. With 10 ms added to
// every request, a store of one request per core (two) read 1 MiB chunks
// at 0.16 GB/s, of 32 at 0.88 (bench/zarrremotebench -latency).
const MinRemoteRequests = 32

// WithMaxRequests bounds the requests a RemoteStore has in flight at once
// (default DefaultMaxRequests). Region reads fetch that many chunks
// concurrently and decode others meanwhile. It has no effect on a
// DirStore.
func WithMaxRequests(n int) StoreOption {
	return func(c *storeConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: %d concurrent requests", kvik.ErrInvalidArgument, n)
		}
		c.maxRequests = n
		return nil
	}
}

// WithWholeShards makes a RemoteStore's region reads ask for a shard of
// uncompressed inner chunks they want all of (all but up to 64 KiB: the
// index) with one GET of the whole object, however large, where by
// default they ask for it in several ranges once it is more than twice
// the size they give a request (to keep the store's request slots busy;
// see Array.ReadRegion). For servers that send a whole object straight
// from its file and a part of one through a copy: versitygw (sendfile(2)
// against a buffered copy) read a 1 GiB sharded array of 32 MiB shards
// into GPU memory at 2.7x the rate of 11 MiB ranges, with a third of the
// requests in flight; a server whose every connection is slow (AWS S3)
// is better served by more ranges. It has no effect on a DirStore.
func WithWholeShards() StoreOption {
	return func(c *storeConfig) error { c.wholeShards = true; return nil }
}

// WithRemoteOptions passes options to the remote endpoint of a
// RemoteStore: credentials, region, endpoint URL, endpoint type, HTTP
// client (see kvik.OpenRemote).
func WithRemoteOptions(opts ...kvik.RemoteOption) StoreOption {
	return func(c *storeConfig) error { c.remote = append(c.remote, opts...); return nil }
}

// OpenURL opens the store at url (s3://, http:// or https://). It reads
// the store's consolidated metadata, if any: .zmetadata and the root
// zarr.json, two GETs that may find nothing.
func OpenURL(ctx context.Context, url string, opts ...StoreOption) (*RemoteStore, error) {
	s := &RemoteStore{}
	if err := s.storeConfig.apply(opts); err != nil {
		return nil, err
	}
	if s.maxRequests == 0 {
		s.maxRequests = DefaultMaxRequests()
	}
	s.sem = make(chan struct{}, s.maxRequests)
	if s.maxDocument > 0 {
		s.remote = append(s.remote, kvik.WithMaxDocumentSize(s.maxDocument))
	}
	var err error
	if s.p, err = kvik.NewRemotePrefix(url, s.remote...); err != nil {
		return nil, err
	}
	if err := s.loadConsolidated(ctx); err != nil {
		s.p.Close()
		return nil, err
	}
	return s, nil
}

// OpenStore opens name as a store: a URL (see kvik.IsURL) with OpenURL,
// anything else as a directory with NewDirStore. On error the Store is
// nil (not an interface holding a nil pointer).
func OpenStore(ctx context.Context, name string, opts ...StoreOption) (Store, error) {
	var s Store
	var err error
	if kvik.IsURL(name) {
		s, err = OpenURL(ctx, name, opts...)
	} else {
		s, err = NewDirStore(name, opts...)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// OpenArray opens the array at name, a local directory or a URL
// ("s3://bucket/data.zarr/group/array"), as a store of its own. Close the
// store (Array.Store) when done if it is a RemoteStore, to drop idle
// connections.
func OpenArray(ctx context.Context, name string, opts ...StoreOption) (*Array, error) {
	if !kvik.IsURL(name) {
		if _, err := os.Stat(name); err != nil {
			return nil, err // a clearer error than the missing zarr.json
		}
	}
	s, err := OpenStore(ctx, name, opts...)
	if err != nil {
		return nil, err
	}
	a, err := Open(ctx, s, "")
	if err != nil {
		if c, ok := s.(interface{ Close() error }); ok {
			c.Close()
		}
		return nil, err
	}
	return a, nil
}

// URL returns the URL of key, or of the store's root for "".
func (s *RemoteStore) URL(key string) string { return s.p.URL(key) }

// EndpointType returns how the store is reached (S3, public S3, HTTP).
func (s *RemoteStore) EndpointType() kvik.RemoteEndpointType { return s.p.EndpointType() }

// MaxDocumentSize returns the cap on the metadata documents the store
// reads and Consolidate writes (WithMaxDocumentSize, or
// kvik.WithMaxDocumentSize in WithRemoteOptions; default
// kvik.DefaultMaxDocumentSize).
func (s *RemoteStore) MaxDocumentSize() int64 { return s.p.MaxDocumentSize() }

// wholeShards reports whether reads ask for wanted shards whole
// (WithWholeShards).
func (s *RemoteStore) wholeShards() bool { return s.storeConfig.wholeShards }

// MaxRequests returns the bound on requests in flight.
func (s *RemoteStore) MaxRequests() int { return s.maxRequests }

// Consolidated reports whether the store has consolidated metadata.
func (s *RemoteStore) Consolidated() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.meta != nil
}

// Close closes idle connections.
func (s *RemoteStore) Close() error { return s.p.Close() }

// request runs f holding one of the store's request tokens.
func (s *RemoteStore) request(ctx context.Context, f func() error) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.sem }()
	return f()
}

// Get returns key's whole object, read with one GET, in buf when it fits
// in cap(buf). An object longer than cap(buf) and the document cap
// (kvik.WithMaxDocumentSize in WithRemoteOptions, default
// kvik.DefaultMaxDocumentSize) fails with an error matching
// kvik.ErrTooLarge; chunks are read with GetMax, bounded by their
// decoded size.
func (s *RemoteStore) Get(ctx context.Context, key string, buf []byte) ([]byte, error) {
	key, err := s.key(key)
	if err != nil {
		return nil, err
	}
	err = s.request(ctx, func() (err error) {
		buf, err = s.p.Get(ctx, key, buf)
		return err
	})
	return buf, err
}

// ReadRange fills p with the bytes of key's object at off (from the end
// when off < 0) with one ranged GET and returns the object's size.
func (s *RemoteStore) ReadRange(ctx context.Context, key string, off int64, p []byte) (int64, error) {
	key, err := s.key(key)
	if err != nil {
		return -1, err
	}
	size := int64(-1)
	if off < 0 && int64(len(p)) > -off {
		return -1, fmt.Errorf("%w: %d bytes from %d before the end", ErrInvalidRegion, len(p), -off)
	}
	err = s.request(ctx, func() (err error) {
		size, err = s.p.ReadRange(ctx, key, p, off)
		return err
	})
	return size, err
}

// readRangeFunc is ReadRange for p's bytes at off (off >= 0) with one
// GET of the range [lo, hi) that holds them, or of p's bytes alone where
// hi is 0, calling progress (when not nil) with the count of p's bytes
// in each time it grows (kvik.RemotePrefix.ReadRangeFunc).
func (s *RemoteStore) readRangeFunc(ctx context.Context, key string, off int64, p []byte, lo, hi int64, progress func(n int)) (int64, error) {
	key, err := s.key(key)
	if err != nil {
		return -1, err
	}
	if hi == 0 {
		lo, hi = off, off+int64(len(p))
	}
	size := int64(-1)
	err = s.request(ctx, func() (err error) {
		size, err = s.p.ReadRangeFunc(ctx, key, p, off, lo, hi, progress)
		return err
	})
	return size, err
}

// Set writes value as key's object with one PUT (or a multipart upload).
func (s *RemoteStore) Set(ctx context.Context, key string, value []byte) error {
	return s.save(ctx, key, kvik.Piece{Data: value})
}

// SetDevice writes size bytes of device memory at buf+devOff as key's
// object, streamed through pinned bounce buffers.
func (s *RemoteStore) SetDevice(ctx context.Context, key string, buf cuda.DevicePtr, size int, devOff int64) error {
	p, err := devicePiece(key, buf, size, devOff)
	if err != nil {
		return err
	}
	return s.save(ctx, key, p)
}

func (s *RemoteStore) save(ctx context.Context, key string, piece kvik.Piece) error {
	return s.write(ctx, key, func(key string) error { return s.p.Save(ctx, key, []kvik.Piece{piece}) })
}

// saveIf is save on the condition of kvik.RemotePrefix.SaveIf: that the
// object still has ETag tag, or, with tag "", that there is none.
func (s *RemoteStore) saveIf(ctx context.Context, key string, piece kvik.Piece, tag string) error {
	return s.write(ctx, key, func(key string) error { return s.p.SaveIf(ctx, key, []kvik.Piece{piece}, tag) })
}

// write runs put, a write of key's object under its prefixed key, in one
// of the store's request slots, and drops the consolidated metadata of a
// metadata key it wrote.
func (s *RemoteStore) write(ctx context.Context, key string, put func(key string) error) error {
	key, err := s.key(key)
	if err != nil {
		return err
	}
	err = s.request(ctx, func() error { return put(key) })
	if err == nil && IsMetadataKey(key) {
		s.dropConsolidated(key)
	}
	return err
}

// Delete removes key's object; a missing one is not an error.
func (s *RemoteStore) Delete(ctx context.Context, key string) error {
	key, err := s.key(key)
	if err != nil {
		return err
	}
	err = s.request(ctx, func() error { return s.p.Delete(ctx, key) })
	if err == nil && IsMetadataKey(key) {
		s.dropConsolidated(key)
	}
	return err
}

// List returns the keys that start with prefix, sorted (S3 only; plain
// HTTP has no listing and fails with errors.ErrUnsupported).
func (s *RemoteStore) List(ctx context.Context, prefix string) ([]string, error) {
	if s.normalizeKeys {
		prefix = strings.ToLower(prefix)
	}
	var keys []string
	err := s.request(ctx, func() (err error) {
		keys, err = s.p.List(ctx, prefix)
		return err
	})
	sort.Strings(keys)
	return keys, err
}

// metadataNames are the base names of Zarr metadata documents.
var metadataNames = []string{"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"}

// IsMetadataKey reports whether key names a Zarr metadata document
// (zarr.json, .zarray, .zattrs, .zgroup or .zmetadata) at any depth: what
// a tool walking a store writes last, so that no reader finds a node
// whose chunks are still on their way.
func IsMetadataKey(key string) bool {
	base := key[strings.LastIndexByte(key, '/')+1:]
	for _, n := range metadataNames {
		if base == n {
			return true
		}
	}
	return false
}

// loadConsolidated reads .zmetadata (v2) and the root zarr.json (v3) and
// keeps the documents of consolidated metadata they hold, replacing those
// kept before. Missing documents are fine; any other failure is an error.
func (s *RemoteStore) loadConsolidated(ctx context.Context) error {
	docs, err := readConsolidated(ctx, s)
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		docs = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.meta = docs
	return nil
}

// readConsolidated returns the documents of a store's consolidated
// metadata by key, from .zmetadata and the root zarr.json.
func readConsolidated(ctx context.Context, s Store) (map[string][]byte, error) {
	docs := map[string][]byte{}
	// Both documents are optional probes: a public bucket answers 403, not
	// 404, for a missing key when listing is not allowed, so a refusal
	// means absent here. A document that is required (an array's own
	// zarr.json) keeps its 403 when it is read.
	v2, err := s.Get(ctx, ".zmetadata", nil)
	switch {
	case absent(err):
	case err != nil:
		return nil, err
	default:
		var doc struct {
			Metadata map[string]json.RawMessage `json:"metadata"`
			Format   int                        `json:"zarr_consolidated_format"`
		}
		if err := json.Unmarshal(v2, &doc); err != nil || doc.Format != 1 {
			return nil, fmt.Errorf("%w: .zmetadata: format %d, %v", ErrInvalidMetadata, doc.Format, err)
		}
		for k, v := range doc.Metadata {
			docs[k] = v
		}
	}
	root, err := s.Get(ctx, "zarr.json", nil)
	switch {
	case absent(err):
		return docs, nil
	case err != nil:
		return nil, err
	}
	docs["zarr.json"] = root
	var doc struct {
		Consolidated *struct {
			Kind     string                     `json:"kind"`
			Metadata map[string]json.RawMessage `json:"metadata"`
		} `json:"consolidated_metadata"`
	}
	if err := json.Unmarshal(root, &doc); err != nil {
		return nil, fmt.Errorf("%w: zarr.json: %v", ErrInvalidMetadata, err)
	}
	if c := doc.Consolidated; c != nil {
		if c.Kind != "inline" {
			return nil, fmt.Errorf("%w: consolidated_metadata of kind %q", ErrInvalidMetadata, c.Kind)
		}
		for path, v := range c.Metadata {
			docs[keyPrefix(path)+"zarr.json"] = v
		}
	}
	return docs, nil
}

// absent reports an optional document that is missing: not found, or
// refused (403), as S3 answers for missing keys without list permission.
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission)
}

// cached returns key's document from the consolidated metadata; known is
// false when the store has none, so that the key must be fetched.
func (s *RemoteStore) cached(key string) (doc []byte, known bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.meta == nil {
		return nil, false
	}
	if s.normalizeKeys {
		key = strings.ToLower(key)
	}
	doc, ok := s.meta[key]
	return doc, ok
}

// dropConsolidated forgets key's consolidated document after a write, so
// that Open reads the new one.
func (s *RemoteStore) dropConsolidated(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.meta, key)
}
