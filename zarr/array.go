package zarr

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/kvikgo/kvik"
)

// Array is a Zarr array (format 2 or 3) in a DirStore.
type Array struct {
	store   *DirStore
	path    string // key prefix of the array, "" or ending in "/"
	meta    *Metadata
	pipe    *pipeline
	grid    []int // chunks per dimension
	workers int
}

// Open opens the array at path in s: zarr.json (v3) if present, else
// .zarray (v2).
func Open(s *DirStore, path string) (*Array, error) {
	prefix := keyPrefix(path)
	var m *Metadata
	b, err := s.Get(prefix + "zarr.json")
	switch {
	case err == nil:
		m, err = ParseMetadataV3(b)
	case errors.Is(err, fs.ErrNotExist):
		b, err = s.Get(prefix + ".zarray")
		if err != nil {
			return nil, err
		}
		m, err = ParseMetadataV2(b, s.dimSep)
		if err == nil {
			m.Attributes, err = readAttrs(s, prefix+".zattrs")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", path, err)
	}
	a, err := newArray(s, prefix, m)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", path, err)
	}
	return a, nil
}

func readAttrs(s *DirStore, key string) (map[string]any, error) {
	b, err := s.Get(key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
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

func newArray(s *DirStore, prefix string, m *Metadata) (*Array, error) {
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
func Create(s *DirStore, path string, m Metadata) (*Array, error) {
	if m.ZarrFormat == 0 {
		m.ZarrFormat = 3
	}
	if err := checkShape(m.Shape, m.ChunkShape); err != nil {
		return nil, err
	}
	if _, err := ParseDataType(m.DataType.Name()); err != nil {
		return nil, err
	}
	raw, err := jsonFill(m.FillValue)
	if err != nil {
		return nil, err
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
			m.Separator = s.dimSep
		}
	case 3:
		if len(m.Codecs) == 0 {
			m.Codecs = []Codec{{Name: "bytes", Configuration: map[string]any{"endian": "little"}}}
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
	docs, err := m.marshal()
	if err != nil {
		return nil, err
	}
	for k, b := range docs {
		if err := s.Set(prefix+k, b); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Metadata returns the array's metadata; do not modify it.
func (a *Array) Metadata() *Metadata { return a.meta }

// Shape returns the array's shape.
func (a *Array) Shape() []int { return append([]int(nil), a.meta.Shape...) }

// DataType returns the element type.
func (a *Array) DataType() DataType { return a.meta.DataType }

// SetWorkers sets how many chunks are read, decoded or encoded at once
// (default GOMAXPROCS). n < 1 means 1.
func (a *Array) SetWorkers(n int) { a.workers = max(n, 1) }

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

// region checks [start, stop) and returns it as a box.
func (a *Array) region(start, stop []int) (box, int, error) {
	nd := len(a.meta.Shape)
	if len(start) != nd || len(stop) != nd {
		return box{}, 0, fmt.Errorf("%w: region of rank %d/%d for a rank-%d array", ErrInvalidRegion, len(start), len(stop), nd)
	}
	b := box{start: append([]int(nil), start...), count: make([]int, nd)}
	for d := 0; d < nd; d++ {
		if start[d] < 0 || stop[d] < start[d] || stop[d] > a.meta.Shape[d] {
			return box{}, 0, fmt.Errorf("%w: [%v, %v) in shape %v", ErrInvalidRegion, start, stop, a.meta.Shape)
		}
		b.count[d] = stop[d] - start[d]
	}
	return b, numElements(b.count) * a.meta.DataType.Size, nil
}

// fileReader reads byte ranges of one chunk file with a kvik FileHandle.
type fileReader struct {
	f   *kvik.FileHandle
	key string
	n   int64
}

func (r *fileReader) size() (int64, error) { return r.n, nil }
func (r *fileReader) readAt(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > r.n || n > r.n-off {
		return nil, fmt.Errorf("%w: %s: range [%d, +%d) of %d bytes", ErrCorruptChunk, r.key, off, n, r.n)
	}
	b := make([]byte, n)
	return b, readFull(r.f, r.key, b, off)
}

// openChunk opens a chunk; ok is false when the chunk does not exist.
func (a *Array) openChunk(key string) (*fileReader, bool, error) {
	f, err := a.store.open(key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	n, err := f.Size()
	if err != nil {
		f.Close()
		return nil, false, err
	}
	return &fileReader{f: f, key: key, n: n}, true, nil
}

// ReadRegion reads [start, stop) into dst, C order, little-endian
// elements; len(dst) must be the region's size in bytes. Chunks are read
// and decoded by up to SetWorkers goroutines; missing chunks read as the
// fill value.
func (a *Array) ReadRegion(start, stop []int, dst []byte) error {
	r, size, err := a.region(start, stop)
	if err != nil {
		return err
	}
	if len(dst) != size {
		return fmt.Errorf("%w: buffer of %d bytes for a %d-byte region", ErrInvalidRegion, len(dst), size)
	}
	out := view{buf: dst, shape: r.count, es: a.meta.DataType.Size}
	return a.eachChunk(r, func(t chunkTask) error { return a.readChunkHost(t, out) })
}

func (a *Array) readChunkHost(t chunkTask, out view) error {
	key := a.ChunkKey(t.coords)
	d := out.sub(t.dstStart)
	fr, ok, err := a.openChunk(key)
	if err != nil {
		return err
	}
	if !ok {
		d.fill(t.sel.count, a.pipe.fill)
		return nil
	}
	defer fr.f.Close()
	if a.pipe.raw() {
		want := int64(numElements(a.meta.ChunkShape) * a.meta.DataType.Size)
		if fr.n != want {
			return fmt.Errorf("%w: %s has %d bytes, want %d", ErrCorruptChunk, key, fr.n, want)
		}
		runs := 0
		a.rawRuns(t, out, func(int64, int, int) error { runs++; return nil })
		if numElements(t.sel.count)*out.es/runs >= hostRunMin {
			return a.rawRuns(t, out, func(fileOff int64, dstOff, n int) error {
				return readFull(fr.f, key, out.buf[dstOff:dstOff+n], fileOff)
			})
		}
		// Short rows: one read of the chunk beats a read per row.
		b, err := readAll(fr)
		if err != nil {
			return err
		}
		copyBox(d, view{buf: b, shape: a.meta.ChunkShape, es: out.es, start: t.sel.start}, t.sel.count)
		return nil
	}
	if a.wholeChunk(t) && a.pipe.sharded() == nil && contiguous(out, t) {
		// The chunk is one run of the destination: let the last codec
		// decode into place.
		off, n := d.offset(), numElements(t.sel.count)*out.es
		place := out.buf[off : off+n : off+n]
		b, err := readAll(fr)
		if err != nil {
			return err
		}
		c, err := a.pipe.decode(b, a.meta.ChunkShape, place)
		if err != nil {
			return fmt.Errorf("chunk %s: %w", key, err)
		}
		if len(c.data) > 0 && &c.data[0] != &place[0] {
			copy(place, c.data)
		}
		return nil
	}
	if err := a.pipe.readRegion(fr, a.meta.ChunkShape, t.sel, d); err != nil {
		return fmt.Errorf("chunk %s: %w", key, err)
	}
	return nil
}

// hostRunMin is the average run length from which uncompressed chunks
// are read run by run into the destination rather than whole and copied.
const hostRunMin = 64 << 10

// rawRuns calls f for each contiguous run of t in an uncompressed chunk:
// the file offset, the offset in the region buffer and the length.
func (a *Array) rawRuns(t chunkTask, out view, f func(fileOff int64, dstOff, n int) error) error {
	src := view{shape: a.meta.ChunkShape, es: out.es, start: t.sel.start}
	type run struct{ off, n int }
	var dr []run
	out.sub(t.dstStart).runs(t.sel.count, func(off, n int) error { dr = append(dr, run{off, n}); return nil })
	di, do := 0, 0
	return src.runs(t.sel.count, func(off, n int) error {
		for n > 0 {
			r := dr[di]
			m := min(n, r.n-do)
			if err := f(int64(off), r.off+do, m); err != nil {
				return err
			}
			off += m
			n -= m
			do += m
			if do == r.n {
				di, do = di+1, 0
			}
		}
		return nil
	})
}

// eachChunk runs f for every chunk the region touches on a.workers
// goroutines, returning the first error.
func (a *Array) eachChunk(r box, f func(chunkTask) error) error {
	var tasks []chunkTask
	forChunks(a.meta.ChunkShape, a.grid, r, func(t chunkTask) error { tasks = append(tasks, t); return nil })
	return parallel(len(tasks), a.workers, func(_, i int) error { return f(tasks[i]) })
}

// parallel runs f(worker, i) for i in [0, n) on up to w goroutines and
// returns the first error; after an error, items not started are skipped.
func parallel(n, w int, f func(worker, i int) error) error {
	w = max(1, min(w, n))
	if n == 0 {
		return nil
	}
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for k := 0; k < w; k++ {
		wg.Add(1)
		go func(worker int) {
			defer wg.Done()
			for {
				mu.Lock()
				if next >= n || first != nil {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := f(worker, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}(k)
	}
	wg.Wait()
	return first
}

// WriteRegion writes src (C order, little-endian elements, the region's
// size in bytes) to [start, stop). Chunks are encoded by up to SetWorkers
// goroutines; a chunk the region covers only in part is read, updated and
// rewritten. Each chunk is written whole to a temporary name and renamed.
func (a *Array) WriteRegion(start, stop []int, src []byte) error {
	r, size, err := a.region(start, stop)
	if err != nil {
		return err
	}
	if len(src) != size {
		return fmt.Errorf("%w: buffer of %d bytes for a %d-byte region", ErrInvalidRegion, len(src), size)
	}
	in := view{buf: src, shape: r.count, es: a.meta.DataType.Size}
	return a.eachChunk(r, func(t chunkTask) error { return a.writeChunk(t, in) })
}

// covers reports whether t covers every element of its chunk that lies
// inside the array.
func (a *Array) covers(t chunkTask) bool {
	for d, c := range t.coords {
		origin := c * a.meta.ChunkShape[d]
		if t.sel.start[d] != 0 || t.sel.count[d] != min(a.meta.ChunkShape[d], a.meta.Shape[d]-origin) {
			return false
		}
	}
	return true
}

func (a *Array) writeChunk(t chunkTask, in view) error {
	key := a.ChunkKey(t.coords)
	shape := a.meta.ChunkShape
	es := a.meta.DataType.Size
	var buf []byte
	if a.covers(t) {
		buf = chunkFill(a.pipe.fill, shape)
	} else {
		fr, ok, err := a.openChunk(key)
		if err != nil {
			return err
		}
		if !ok {
			buf = chunkFill(a.pipe.fill, shape)
		} else {
			b, err := readAll(fr)
			fr.f.Close()
			if err != nil {
				return err
			}
			c, err := a.pipe.decode(b, shape, nil)
			if err != nil {
				return fmt.Errorf("chunk %s: %w", key, err)
			}
			buf = append([]byte(nil), c.data...)
		}
	}
	copyBox(view{buf: buf, shape: shape, es: es, start: t.sel.start}, in.sub(t.dstStart), t.sel.count)
	enc, err := a.pipe.encode(chunkArray{shape: shape, data: buf})
	if err != nil {
		return fmt.Errorf("chunk %s: %w", key, err)
	}
	return a.store.Set(key, enc)
}
