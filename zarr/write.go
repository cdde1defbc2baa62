package zarr

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
)

// WriteRegion writes src (C order, little-endian elements, the region's
// size in bytes) to [start, stop). Chunks are encoded by up to SetWorkers
// goroutines, or, Blosc LZ4 chunks the region covers whole, by the GPU of
// SetEncodeDevice; a chunk the region covers only in part is read,
// updated and rewritten. Each chunk is stored whole and atomically
// (Store.Set), or, where all of it is the fill value, deleted (see
// SetWriteEmptyChunks).
// Writes of one chunk (shard) wait for each other within the process,
// through any Array on the same store (see docs/zarr.md): concurrent
// calls may write disjoint parts of one chunk. Across processes only
// writes of disjoint chunks are safe, unless every process opens its
// store WithProcessLocks.
func (a *Array) WriteRegion(ctx context.Context, start, stop []int, src []byte) error {
	r, size, err := a.region(start, stop)
	if err != nil {
		return err
	}
	if len(src) != size {
		return fmt.Errorf("%w: buffer of %d bytes for a %d-byte region", ErrInvalidRegion, len(src), size)
	}
	in := view{buf: src, shape: r.count, es: a.meta.DataType.Size}
	tasks, err := a.writeHostGPU(ctx, in, a.chunkTasks(r))
	if err != nil {
		return err
	}
	a.spreadDirs(tasks)
	return a.run(ctx, len(tasks), func(ctx context.Context, _, i int) error { return a.writeChunk(ctx, tasks[i], in) })
}

// spreadsDirs reports whether a's writes spread their chunks over
// directories (spreadDirs, and bandsSpread bands at once for device
// writes): a DirStore's, of two dimensions or more. Chunk keys with "/"
// keep a row of chunks in one directory (c/i/j in c/i), whose lock
// creating or renaming a file takes; 16 workers saving one row at once
// spent 5% of a Blosc-lz4 write of 1 GiB in stat, open and rename,
// their cores idle meanwhile.
func (a *Array) spreadsDirs() bool {
	_, ok := a.store.(*DirStore)
	return ok && len(a.meta.Shape) >= 2 && !zarrtune.RowMajorWrites.Load()
}

// bandsSpread is how many bands of a device write to a DirStore the
// workers take chunks of in turn (half its buffers at most): a band of
// one row of chunks is one directory.
const bandsSpread = 4

// spreadDirs orders tasks, chunks in C order, so that the workers, which
// take them in turn, write to files of different directories at once:
// by the last coordinate first (see spreadsDirs).
func (a *Array) spreadDirs(tasks []chunkTask) {
	if !a.spreadsDirs() {
		return
	}
	slices.SortStableFunc(tasks, func(x, y chunkTask) int {
		n := len(x.coords) - 1
		if c := cmp.Compare(x.coords[n], y.coords[n]); c != 0 {
			return c
		}
		return slices.Compare(x.coords[:n], y.coords[:n])
	})
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

func (a *Array) writeChunk(ctx context.Context, t chunkTask, in view) error {
	key := a.ChunkKey(t.coords)
	unlock, err := a.lockChunk(ctx, key)
	if err != nil {
		return err
	}
	defer unlock()
	shape := a.meta.ChunkShape
	es := a.meta.DataType.Size
	n := numElements(shape) * es
	var buf []byte
	var pooled, out *[]byte
	var enc []byte
	// Pooled buffers go back once the chunk is stored, unless the stored
	// value is in them and the store may keep it.
	release := func(p *[]byte) {
		if p != nil && (!a.keepsValues() || !overlaps(enc, *p)) {
			putBuf(p)
		}
	}
	defer func() { release(pooled); release(out) }()
	var dst []byte
	if n <= maxPooledOutput && !a.pipe.raw() {
		// Encoded into a pooled buffer of the chunk's size, not a new
		// one per chunk (zeroed, then garbage for the collector).
		out = getBuf(n)
		dst = *out
	}
	if a.covers(t) && a.insideArray(t) {
		// Every byte is the region's: a chain that can read the chunk
		// where it lies encodes it without a gathered copy.
		src := in.sub(t.dstStart)
		if !a.writeEmpty && viewIsFill(src, t.sel.count, a.pipe.fill) {
			return a.store.Delete(ctx, key)
		}
		var ok bool
		if enc, ok, err = a.pipe.encodeFrom(src, t.sel.count, dst); ok {
			if err != nil {
				return fmt.Errorf("chunk %s: %w", key, err)
			}
			return a.store.Set(ctx, key, enc)
		}
	}
	// The chunk is assembled in a pooled buffer (a new one per chunk
	// was garbage of a chunk at every chunk).
	pooled = getBuf(n)
	buf = *pooled
	enc, err = a.rewriteChunk(ctx, key, a.covers(t), func(old []byte, found, keep bool) ([]byte, bool, error) {
		return a.merge(t, in, key, buf, old, found, dst, keep)
	})
	return err
}

// rewriteChunk stores chunk key as merge makes it of the stored bytes,
// old where found, and returns what it stored; whole: the write covers
// the chunk, which is not read. Through a RemoteStore opened
// WithProcessLocks, a chunk not whole is read and written on the
// condition that it is still the version read (writeChunkIf), merge
// asked to keep a stored chunk's bytes even where all fill value.
// Elsewhere a chunk merge leaves empty (all fill value, left out) is
// deleted where it may be stored: found, or whole.
func (a *Array) rewriteChunk(ctx context.Context, key string, whole bool, merge func(old []byte, found, keep bool) ([]byte, bool, error)) ([]byte, error) {
	var old []byte
	found := false
	if !whole {
		if s, ok := a.store.(*RemoteStore); ok && s.processLocks {
			return a.writeChunkIf(ctx, s, key, func(old []byte, found bool) ([]byte, bool, error) { return merge(old, found, found) })
		}
		var err error
		if old, found, err = a.fetch(ctx, piece{key: key, n: -1}, nil); err != nil {
			return nil, err
		}
	}
	enc, empty, err := merge(old, found, false)
	switch {
	case err != nil:
		return nil, err
	case !empty:
		return enc, a.store.Set(ctx, key, enc)
	case found || whole:
		return nil, a.store.Delete(ctx, key)
	}
	return nil, nil
}

// merge assembles chunk t, of key, in buf and encodes it into dst: the
// fill value, unless every byte is the region's; then the stored bytes
// old, decoded, where found; then the region's part from in. A chunk all
// of the fill value is empty, not encoded, unless a stores such chunks
// or keep asks for its bytes.
func (a *Array) merge(t chunkTask, in view, key string, buf, old []byte, found bool, dst []byte, keep bool) (enc []byte, empty bool, err error) {
	shape := a.meta.ChunkShape
	if !a.covers(t) || !a.insideArray(t) {
		fillRepeat(buf, a.pipe.fill)
	}
	if found {
		// Decoded into buf where the codecs can (no chunk-sized
		// buffer of its own, then copied); the copy is then in place.
		c, err := a.pipe.decode(old, shape, buf)
		if err != nil {
			return nil, false, fmt.Errorf("chunk %s: %w", key, err)
		}
		buf = append(buf[:0], c.data...)
	}
	copyBox(view{buf: buf, shape: shape, es: a.meta.DataType.Size, start: t.sel.start}, in.sub(t.dstStart), t.sel.count)
	if !a.writeEmpty && !keep && isFill(buf, a.pipe.fill) {
		return nil, true, nil
	}
	enc, err = a.pipe.encode(chunkArray{shape: shape, data: buf}, dst)
	if err != nil {
		return nil, false, fmt.Errorf("chunk %s: %w", key, err)
	}
	return enc, false, nil
}

// maxPooledOutput bounds the chunks whose encoded bytes a write puts in
// a pooled buffer of the chunk's size. Larger ones (shards) get a new
// buffer of their encoded size: a pooled one per worker of a shard's
// size would hold memory for little gain.
const maxPooledOutput = 16 << 20

// keepsValues reports whether a's store may keep (or still read) a value
// after its Set returns. A DirStore has written it to its file; other
// stores may hold it, and an HTTP transport may read a request's body
// after the response.
func (a *Array) keepsValues() bool {
	_, dir := a.store.(*DirStore)
	return !dir
}

// insideArray reports whether t's chunk lies wholly inside the array (an
// edge chunk is padded, so it is never one contiguous piece of a region).
func (a *Array) insideArray(t chunkTask) bool {
	for d, c := range t.coords {
		if (c+1)*a.meta.ChunkShape[d] > a.meta.Shape[d] {
			return false
		}
	}
	return true
}

// contiguous reports whether count elements from start are one run in v.
func contiguous(v view, start, count []int) bool {
	runs := 0
	v.sub(start).runs(count, func(int, int) error { runs++; return nil })
	return runs == 1
}
