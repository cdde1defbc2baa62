package zarr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strconv"
	"strings"

	"github.com/kvikgo/kvik/internal/formatkit/npytime"
)

// Array is a Zarr array (format 2 or 3) in a Store.
type Array struct {
	store   Store
	path    string // key prefix of the array, "" or ending in "/"
	meta    *Metadata
	pipe    *pipeline
	grid    []int // chunks per dimension
	workers int
	// writeEmpty: writes store chunks all of the fill value
	// (SetWriteEmptyChunks).
	writeEmpty bool
	// cpuDecode: device reads decode on the CPU only (SetGPUDecode).
	cpuDecode bool
	// cpuEncode: device writes encode on the CPU only (SetGPUEncode).
	cpuEncode bool
	// encodeDev: 1 + the ordinal of the GPU that host writes encode on
	// (SetEncodeDevice); 0, none.
	encodeDev int
}

// Open opens the array at path in s: zarr.json (v3) if present, else
// .zarray (v2), from the store's consolidated metadata when it has them.
func Open(ctx context.Context, s Store, path string) (*Array, error) {
	prefix := keyPrefix(path)
	m, err := readMetadata(ctx, s, prefix)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", path, err)
	}
	a, err := newArray(s, prefix, m)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", path, err)
	}
	return a, nil
}

// consolidatedStore is a store with consolidated metadata: cached
// returns a document and whether the consolidated metadata knows it.
type consolidatedStore interface {
	cached(key string) (doc []byte, known bool)
}

func readMetadata(ctx context.Context, s Store, prefix string) (*Metadata, error) {
	cs, _ := s.(consolidatedStore)
	if cs != nil {
		if b, ok := cs.cached(prefix + "zarr.json"); ok {
			return ParseMetadataV3(b)
		}
		if b, ok := cs.cached(prefix + ".zarray"); ok {
			m, err := ParseMetadataV2(b, dimSep(s))
			if err != nil {
				return nil, err
			}
			// Consolidated v2 metadata holds every .zattrs there is.
			attrs, _ := cs.cached(prefix + ".zattrs")
			m.Attributes, err = parseAttrs(prefix+".zattrs", attrs)
			return m, err
		}
	}
	b, err := s.Get(ctx, prefix+"zarr.json", nil)
	if err == nil {
		return ParseMetadataV3(b)
	}
	if !absent(err) {
		return nil, err
	}
	// A 403 for zarr.json may be a public bucket's answer for a missing
	// key (a v2 array): try .zarray, and keep the 403 if that fails too.
	v3err := err
	if b, err = s.Get(ctx, prefix+".zarray", nil); err != nil {
		if errors.Is(v3err, fs.ErrPermission) {
			return nil, v3err
		}
		return nil, err
	}
	m, err := ParseMetadataV2(b, dimSep(s))
	if err != nil {
		return nil, err
	}
	attrs, err := s.Get(ctx, prefix+".zattrs", nil)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	m.Attributes, err = parseAttrs(prefix+".zattrs", attrs)
	return m, err
}

// dimSep returns the store's default v2 dimension separator.
func dimSep(s Store) string {
	if d, ok := s.(interface{ DimensionSeparator() string }); ok {
		return d.DimensionSeparator()
	}
	return "."
}

func parseAttrs(key string, b []byte) (map[string]any, error) {
	if b == nil {
		return nil, nil
	}
	var m map[string]any
	if err := decodeStrict(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidMetadata, key, err)
	}
	return m, nil
}

func keyPrefix(path string) string {
	path = strings.Trim(path, "/")
	if path == "" {
		return ""
	}
	return path + "/"
}

func newArray(s Store, prefix string, m *Metadata) (*Array, error) {
	a := &Array{store: s, path: prefix, meta: m, workers: runtime.GOMAXPROCS(0)}
	var err error
	if m.ZarrFormat == 2 {
		a.pipe, err = newPipelineV2(m)
	} else {
		a.pipe, err = newPipelineV3(m.Codecs, m.DataType, m.fill, m.ChunkShape)
	}
	if err != nil {
		return nil, err
	}
	a.grid = make([]int, len(m.Shape))
	for i := range m.Shape {
		a.grid[i] = (m.Shape[i] + m.ChunkShape[i] - 1) / m.ChunkShape[i]
	}
	return a, nil
}

// Create writes the metadata of a new array at path in s and returns it.
// Zero values choose defaults: format 3, codecs [bytes little-endian],
// chunk key encoding "default" with "/"; for format 2, C order and the
// store's dimension separator.
//
// Before the array's own documents, Create writes a group document of
// the array's format for each parent, root included, that has none, root
// first, as zarr-python does: {"zarr_format": 2} as .zgroup, or
// {"zarr_format": 3, "node_type": "group", "attributes": {}} as
// zarr.json. Existing group documents are kept. A parent that holds an
// array fails with ErrInvalidMetadata before anything is written, and so
// does a codec chain that can be read but not written (blosc with
// blosclz or snappy, bz2) with ErrUnsupportedCodec. A path that already holds
// an array or a group fails with ErrExists (and fs.ErrExist), as
// zarr-python's create does without overwrite: the old array's chunks
// would read as the new one's. Delete removes a node to replace it.
func Create(ctx context.Context, s Store, path string, m Metadata) (*Array, error) {
	if m.ZarrFormat == 0 {
		m.ZarrFormat = 3
	}
	if err := checkShape(m.Shape, m.ChunkShape); err != nil {
		return nil, err
	}
	if err := checkDimensionNames(len(m.DimensionNames) > 0, len(m.DimensionNames), len(m.Shape)); err != nil {
		return nil, err
	}
	if m.DataType.temporal() {
		if m.DataType.Scale == 0 {
			m.DataType.Scale = 1
		}
		m.DataType.Unit, _ = npytime.Unit(m.DataType.Unit)
	}
	if err := m.DataType.check(); err != nil {
		return nil, err
	}
	raw, err := jsonFill(m.FillValue)
	if err != nil {
		return nil, err
	}
	if m.FillValue == nil && (m.DataType.isString() || m.DataType.Variable()) {
		raw = json.RawMessage(`""`) // zero bytes, as a string kind's nil
	}
	if m.fill, err = fillBytes(m.DataType, raw, false); err != nil {
		return nil, err
	}
	m.FillValue = fillJSON(m.DataType, m.fill)
	switch m.ZarrFormat {
	case 2:
		if m.Order == 0 {
			m.Order = 'C'
		}
		if m.Order != 'C' && m.Order != 'F' {
			return nil, fmt.Errorf("%w: order %q", ErrInvalidMetadata, m.Order)
		}
		if m.Separator == "" {
			m.Separator = dimSep(s)
		}
		if k := m.DataType.Kind; m.DataType.Variable() && (len(m.Filters) == 0 || vlenKinds[m.Filters[0].Name] != k) {
			m.Filters = append([]Codec{{Name: vlenName(k)}}, m.Filters...)
		}
	case 3:
		if m.DataType.Struct != "" {
			// v3 spells records as an extension data type ("struct" of
			// zarr-extensions, zarr-python 3's Structured), not a descr
			// list: not written (nor read) yet.
			return nil, fmt.Errorf("%w: structured types in Zarr v3", ErrUnsupportedDataType)
		}
		if len(m.Codecs) == 0 {
			m.Codecs = []Codec{{Name: "bytes", Configuration: map[string]any{"endian": "little"}}}
			if m.DataType.Variable() {
				m.Codecs = []Codec{{Name: vlenName(m.DataType.Kind)}}
			}
		}
		if m.ChunkKeyEncoding == "" {
			m.ChunkKeyEncoding = "default"
		}
		if m.Separator == "" {
			m.Separator = map[string]string{"default": "/", "v2": "."}[m.ChunkKeyEncoding]
		}
		if m.ChunkKeyEncoding != "default" && m.ChunkKeyEncoding != "v2" {
			return nil, fmt.Errorf("%w: chunk key encoding %q", ErrInvalidMetadata, m.ChunkKeyEncoding)
		}
	default:
		return nil, fmt.Errorf("%w: zarr_format %d", ErrInvalidMetadata, m.ZarrFormat)
	}
	if m.Separator != "." && m.Separator != "/" {
		return nil, fmt.Errorf("%w: separator %q", ErrInvalidMetadata, m.Separator)
	}
	prefix := keyPrefix(path)
	a, err := newArray(s, prefix, &m)
	if err != nil {
		return nil, err
	}
	// An array that could not be written is refused before anything is.
	if err := a.pipe.writable(); err != nil {
		return nil, err
	}
	docs, err := m.marshal()
	if err != nil {
		return nil, err
	}
	if err := nodeAbsent(ctx, s, prefix); err != nil {
		return nil, fmt.Errorf("create %q: %w", path, err)
	}
	if err := createParents(ctx, s, m.ZarrFormat, prefix); err != nil {
		return nil, fmt.Errorf("create %q: %w", path, err)
	}
	// Attributes before the document that makes the array exist.
	for _, k := range []string{".zattrs", ".zarray", "zarr.json"} {
		if b, ok := docs[k]; ok {
			if err := s.Set(ctx, prefix+k, b); err != nil {
				return nil, err
			}
		}
	}
	return a, nil
}

// Store returns the store the array is in.
func (a *Array) Store() Store { return a.store }

// Path returns the array's path in its store ("" for the root).
func (a *Array) Path() string { return strings.TrimSuffix(a.path, "/") }

// Metadata returns the array's metadata; do not modify it.
func (a *Array) Metadata() *Metadata { return a.meta }

// Shape returns the array's shape.
func (a *Array) Shape() []int { return append([]int(nil), a.meta.Shape...) }

// DataType returns the element type.
func (a *Array) DataType() DataType { return a.meta.DataType }

// SetWorkers sets how many chunks are decoded or encoded at once
// (default GOMAXPROCS); on a RemoteStore, its MaxRequests more chunks are
// being fetched meanwhile. n < 1 means 1.
func (a *Array) SetWorkers(n int) { a.workers = max(n, 1) }

// SetWriteEmptyChunks sets whether writes store a chunk (a shard) whose
// every element is the fill value. By default they leave it out,
// deleting it where it was stored, as zarr-python 3
// (write_empty_chunks=False) and TensorStore do: a read finds the fill
// value either way, and an array takes the room of what it holds. With
// on, every chunk a write touches is stored, as zarr-python 2 does.
// Elements are compared bit for bit (a NaN matches only the fill's NaN,
// -0 not 0). One exception: a write of part of a stored chunk through a
// RemoteStore opened WithProcessLocks stores it, fill value or not (S3
// has no delete on the condition that an object is a version read).
// Set it before the array is used, as SetWorkers.
func (a *Array) SetWriteEmptyChunks(on bool) { a.writeEmpty = on }

// SetGPUDecode sets whether device reads may decode on the GPU: a share
// of the zstd chunks of a read of 256 MiB or more (up to two batches of
// 256 frames in flight, 1.2 GiB of device memory each while the read
// lasts) and the unshuffle of Blosc's byte-shuffled chunks (a chunk's
// worth of device memory per worker). By default they do, wherever the
// driver runs kvik's kernels; off, device reads decode every chunk on
// the CPU, as host reads do, and take no device memory but their
// destination. Set it before the array is used, as SetWorkers.
func (a *Array) SetGPUDecode(on bool) { a.cpuDecode = !on }

// SetGPUEncode sets whether device writes may encode on the GPU: the
// whole chunks of an array of Blosc LZ4 chunks (byte shuffle or none,
// elements of 1 to 8 bytes; or the inner chunks of its whole shards)
// that a region covers, where they make 32
// MiB or more, in batches of 256 MiB (about 1.5 GiB of device memory
// while the write lasts, two batches; kernels.BloscLZ4). By default
// they do, wherever the driver runs kvik's kernels; off, device writes
// copy the region to host memory and encode on the CPU, as host writes
// do. Set it before the array is used, as SetWorkers.
func (a *Array) SetGPUEncode(on bool) { a.cpuEncode = !on }

// SetEncodeDevice sets the GPU, by ordinal, that host writes (WriteRegion
// and the writes made of it) encode on what device writes encode on the
// GPU (see SetGPUEncode): the whole chunks a write covers, 32 MiB of them
// or more, gathered by the workers into pinned buffers and copied to the
// device batch by batch (about 2 GiB of device memory while the write
// lasts, and about 768 MiB of pinned buffers, which kvik's pool keeps for
// the next write: kvik.FreeBounceBuffers frees them) while the chunks of
// the batch before are stored: the cores gather and store, the GPU
// encodes. A 1 GiB array of 1 MiB chunks into tmpfs so written ran at
// 1.10-1.40x the cores' encode-only pace, where the cores' own write ran
// at 0.82-0.87x (H200, 16 cores, Blosc LZ4, the pages of the files the
// bound). By default, and for d < 0, host writes encode on the CPU. Where
// no CUDA driver is found, or it cannot run kvik's kernels, they do so
// too; an ordinal the driver does not know is an error of the write. The
// device's primary context is retained for the life of the process, as
// KvikIO's are. Set it before the array is used, as SetWorkers.
func (a *Array) SetEncodeDevice(d int) { a.encodeDev = max(d+1, 0) }

// ChunkKey returns the store key of the chunk at grid coordinates c.
func (a *Array) ChunkKey(c []int) string {
	var b strings.Builder
	b.WriteString(a.path)
	if a.meta.ZarrFormat == 3 && a.meta.ChunkKeyEncoding == "default" {
		b.WriteString("c")
		for _, x := range c {
			b.WriteString(a.meta.Separator)
			b.WriteString(strconv.Itoa(x))
		}
		return b.String()
	}
	if len(c) == 0 {
		b.WriteString("0")
	}
	for i, x := range c {
		if i > 0 {
			b.WriteString(a.meta.Separator)
		}
		b.WriteString(strconv.Itoa(x))
	}
	return b.String()
}

// region checks [start, stop) and returns it as a box and its size in
// bytes. An array of variable-length elements has no such size: it fails
// with ErrUnsupportedDataType (see ReadStrings).
func (a *Array) region(start, stop []int) (box, int, error) {
	if a.meta.DataType.Variable() {
		return box{}, 0, vlenCodec{}.refuse()
	}
	b, err := a.box(start, stop)
	if err != nil {
		return box{}, 0, err
	}
	return b, numElements(b.count) * a.meta.DataType.Size, nil
}

// box checks [start, stop) and returns it as a box.
func (a *Array) box(start, stop []int) (box, error) {
	nd := len(a.meta.Shape)
	if len(start) != nd || len(stop) != nd {
		return box{}, fmt.Errorf("%w: region of rank %d/%d for a rank-%d array", ErrInvalidRegion, len(start), len(stop), nd)
	}
	b := box{start: append([]int(nil), start...), count: make([]int, nd)}
	for d := 0; d < nd; d++ {
		if start[d] < 0 || stop[d] < start[d] || stop[d] > a.meta.Shape[d] {
			return box{}, fmt.Errorf("%w: [%v, %v) in shape %v", ErrInvalidRegion, start, stop, a.meta.Shape)
		}
		b.count[d] = stop[d] - start[d]
	}
	return b, nil
}
