package zarr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync/atomic"

	"github.com/kvikgo/kvik/internal/posix"
	"golang.org/x/sync/errgroup"
)

// piece is one stored value a region read needs, or a byte range of one:
// a chunk (n < 0: the whole value) or an inner chunk of a shard ([off,
// off+n) of the shard), with the codecs that decode it and the part of
// the region it fills.
type piece struct {
	key      string
	off, n   int64
	missing  bool // known missing (a shard index entry): fill value
	pipe     *pipeline
	shape    []int // decoded shape
	sel      box   // the part needed, in the decoded piece
	dstStart []int // where sel starts in the region
	size     int64 // an inner chunk's: its shard's stored size (else 0)
}

// whole reports whether the piece's selection is all of it.
func (pc *piece) whole() bool {
	for d := range pc.sel.count {
		if pc.sel.start[d] != 0 || pc.sel.count[d] != pc.shape[d] {
			return false
		}
	}
	return true
}

// storedSize is the size in bytes of an uncompressed piece.
func (pc *piece) storedSize() int64 { return int64(numElements(pc.shape) * pc.pipe.dt.Size) }

// requestSlots returns the bound on requests in flight of a store that
// has one (a RemoteStore's MaxRequests), and whether it has: a store
// without is local, its reads cheap next to a decode.
func requestSlots(s Store) (int, bool) {
	if r, ok := s.(interface{ MaxRequests() int }); ok {
		return r.MaxRequests(), true
	}
	return 0, false
}

// concurrency returns how many pieces are handled at once: a.workers
// decoding, plus the requests a remote store keeps in flight meanwhile.
func (a *Array) concurrency() int {
	slots, _ := requestSlots(a.store)
	return a.workers + slots
}

// plan lists the pieces of region r: one per chunk, or for a sharded
// array the inner chunks it needs, after reading the shard indexes.
func (a *Array) plan(ctx context.Context, r box) ([]piece, error) {
	pieces := a.chunkPieces(r)
	s := a.pipe.sharded()
	if s == nil {
		return pieces, nil
	}
	inner := make([][]piece, len(pieces))
	err := a.run(ctx, len(pieces), func(ctx context.Context, _, i int) (err error) {
		inner[i], err = a.shardPieces(ctx, s, pieces[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	pieces = pieces[:0]
	for _, p := range inner {
		pieces = append(pieces, p...)
	}
	return pieces, nil
}

// chunkPieces returns a piece for each chunk (shard) of r, in order.
func (a *Array) chunkPieces(r box) []piece {
	pieces := make([]piece, 0, chunksIn(a.meta.ChunkShape, a.grid, r))
	forChunks(a.meta.ChunkShape, a.grid, r, func(t chunkTask) error {
		pieces = append(pieces, piece{key: a.ChunkKey(t.coords), n: -1, pipe: a.pipe, shape: a.meta.ChunkShape, sel: t.sel, dstStart: t.dstStart})
		return nil
	})
	return pieces
}

// shardPieces reads the index of the shard of pc and returns the inner
// chunks pc's selection needs. Sizes the index gives are checked before
// anything is allocated for them: an uncompressed inner chunk must have
// its exact size, others at most storedLimit.
func (a *Array) shardPieces(ctx context.Context, s *shardingCodec, pc piece) ([]piece, error) {
	idx, size, err := s.readShardIndex(ctx, a.store, pc.key)
	if errors.Is(err, fs.ErrNotExist) {
		pc.missing = true
		return []piece{pc}, nil
	}
	if err != nil {
		return nil, err
	}
	var out []piece
	err = forChunks(s.inner, s.perShard, pc.sel, func(t chunkTask) error {
		e := idx[flatIndex(t.coords, s.perShard)]
		dst := make([]int, len(t.dstStart))
		for d := range dst {
			dst[d] = pc.dstStart[d] + t.dstStart[d]
		}
		p := piece{key: pc.key, off: int64(e[0]), n: int64(e[1]), pipe: s.codecs, shape: s.inner, sel: t.sel, dstStart: dst, size: size}
		p.missing = e[0] == missingEntry
		if !p.missing {
			if p.pipe.raw() {
				if err := checkRaw(p, p.n); err != nil {
					return err
				}
			} else if lim := storedLimit(p.storedSize()); p.n > lim {
				return fmt.Errorf("%w: %s: inner chunk %v of %d bytes, more than %d for %d decoded", ErrCorruptChunk, pc.key, t.coords, p.n, lim, p.storedSize())
			}
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// storedLimit bounds the stored size of an encoded chunk of decoded
// bytes: codecs add a little (headers, checksums, an inner shard's index
// of up to 16 bytes per element, a delta's wider type), never more.
func storedLimit(decoded int64) int64 { return 20*decoded + 1<<20 }

// fetch returns the stored bytes of pc, in buf when they fit in cap(buf).
// ok is false for a chunk that does not exist.
func (a *Array) fetch(ctx context.Context, pc piece, buf []byte) (b []byte, ok bool, err error) {
	if pc.n < 0 {
		b, err = getChunk(ctx, a.store, pc.key, buf, a.maxStoredChunk())
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		return b, err == nil, err
	}
	b = buf[:0]
	if int64(cap(buf)) < pc.n {
		b = make([]byte, 0, pc.n)
	}
	b = b[:pc.n]
	// An inner chunk the index lists must be there: no fill value here.
	_, err = a.store.ReadRange(ctx, pc.key, pc.off, b)
	return b, err == nil, err
}

// decodeInto decodes the stored bytes b of pc into d; place, when not
// nil, is the destination of the whole decoded piece, in order, and
// decoders write there. Otherwise the piece is decoded into a pooled
// buffer and its selection copied to d.
func (a *Array) decodeInto(pc piece, b []byte, d view, place []byte) error {
	if pc.pipe.sharded() != nil {
		if err := pc.pipe.readRegion(bytesReader(b), pc.shape, pc.sel, d); err != nil {
			return fmt.Errorf("chunk %s: %w", pc.key, err)
		}
		return nil
	}
	if place == nil && pc.whole() {
		// A chain that can decode into the chunk's rows where they lie
		// needs no buffer of the chunk, nor a copy from it.
		if ok, err := pc.pipe.decodeRuns(b, pc.shape, runsOf(d, pc.sel.count)); ok {
			if err != nil {
				return fmt.Errorf("chunk %s: %w", pc.key, err)
			}
			return nil
		}
	}
	into := place
	if into == nil {
		p := getBuf(numElements(pc.shape) * pc.pipe.dt.Size)
		defer putBuf(p)
		into = *p
	}
	c, err := pc.pipe.decode(b, pc.shape, into)
	if err != nil {
		return fmt.Errorf("chunk %s: %w", pc.key, err)
	}
	switch {
	case place == nil:
		copyBox(d, view{buf: c.data, shape: pc.shape, es: d.es, start: pc.sel.start}, pc.sel.count)
	case len(c.data) > 0 && &c.data[0] != &place[0]:
		copy(place, c.data)
	}
	return nil
}

// fetchPiece fetches pc, one piece of a span, whose region (or slot)
// memory is bv: uncompressed bytes straight into place where they are
// the decoded piece (or, from a local store, run by run into bv), a
// missing piece as its fill value (done), else into a pooled buffer.
func (a *Array) fetchPiece(ctx context.Context, pc piece, bv view) (fetched, error) {
	hv := bv.sub(pc.dstStart)
	if pc.missing {
		hv.fill(pc.sel.count, pc.pipe.fill)
		return fetched{done: true}, nil
	}
	place := hostPlace(pc, bv) // the destination of the whole decoded piece
	if ds, ok := a.store.(*DirStore); ok && place == nil && pc.pipe.raw() && pc.n < 0 {
		done, err := a.readRawRuns(ctx, ds, pc, bv)
		if done || err != nil {
			return fetched{done: true}, err
		}
	}
	var f fetched
	var err error
	if pc.pipe.raw() && place != nil {
		var ok bool
		f.b, ok, err = a.fetch(ctx, pc, place)
		f.done = err != nil || !ok
	} else {
		f, err = a.fetchStored(ctx, pc)
	}
	if f.done && err == nil {
		hv.fill(pc.sel.count, pc.pipe.fill)
	}
	return f, err
}

// fetchStored fetches the stored bytes of pc into a pooled buffer; done
// (no bytes) where the chunk is missing, its fill left to the caller.
func (a *Array) fetchStored(ctx context.Context, pc piece) (fetched, error) {
	if pc.missing {
		return fetched{done: true}, nil
	}
	hint := pc.n // an inner chunk's exact size, or a chunk's decoded size
	if hint < 0 {
		hint = pc.storedSize()
	}
	p := getBuf(int(hint))
	b, ok, err := a.fetch(ctx, pc, (*p)[:0])
	if cap(b) > cap(*p) { // keep the larger buffer the store made
		*p = b[:0]
	}
	if err != nil || !ok {
		putBuf(p)
		return fetched{done: true}, err
	}
	return fetched{p: p, b: b}, nil
}

// checkRaw checks the size of an uncompressed piece.
func checkRaw(pc piece, n int64) error {
	if want := pc.storedSize(); n != want {
		return fmt.Errorf("%w: %s has %d bytes, want %d", ErrCorruptChunk, pc.key, n, want)
	}
	return nil
}

// ReadRegion reads [start, stop) into dst, C order, little-endian
// elements; len(dst) must be the region's size in bytes. Chunks are
// fetched and decoded concurrently (see SetWorkers), each straight into
// its place in dst where it is contiguous there; missing chunks read as
// the fill value. From a store with request slots (a RemoteStore), a
// read has a fetcher for every slot while their chunks (decoded) fit in
// 256 MiB, never fewer than the workers; a fetcher starts a request only
// while fewer chunks than workers wait to be decoded, so a store that
// answers faster than the workers decode has fewer in flight. The inner
// chunks of a shard are read in ranges of shard bytes sized to keep the
// slots busy (two per worker), a shard wanted whole with one request
// where that leaves one per worker (or always: WithWholeShards); the
// read begins once the indexes of its first rows of shards are in, and
// reads the others as it goes. Cancelling ctx stops the reads in flight.
func (a *Array) ReadRegion(ctx context.Context, start, stop []int, dst []byte) error {
	r, size, err := a.region(start, stop)
	if err != nil {
		return err
	}
	if len(dst) != size {
		return fmt.Errorf("%w: buffer of %d bytes for a %d-byte region", ErrInvalidRegion, len(dst), size)
	}
	if size == 0 {
		return ctx.Err()
	}
	p, err := a.hostPlan(ctx, r)
	if err != nil {
		return err
	}
	return a.readBands(ctx, p, hostSink{dst: dst, region: r.count, es: a.meta.DataType.Size}, nil)
}

// cellPipe returns the codecs of what a read decodes at once: the
// array's, or its shards' inner chunks'.
func (a *Array) cellPipe() *pipeline {
	if s := a.pipe.sharded(); s != nil {
		return s.codecs
	}
	return a.pipe
}

// cellShape returns the shape of what a read decodes at once: a chunk,
// or an inner chunk of a shard.
func (a *Array) cellShape() []int {
	if s := a.pipe.sharded(); s != nil {
		return s.inner
	}
	return a.meta.ChunkShape
}

// hostRunMin is the average run length from which uncompressed chunks of
// a local store are read run by run into the destination rather than
// with one preadv per stretch contiguous in the file. Remote stores
// always fetch whole chunks: a request per run costs more than the bytes
// it saves.
const hostRunMin = 64 << 10

// readRawRuns reads the selection of pc, an uncompressed chunk of ds,
// from its file straight into bv: run by run through kvik where runs are
// long, else with one preadv(2) per stretch that is contiguous in the
// file (a chunk's rows, 2 KiB each for 512 x 512 float32 chunks in a
// wider region, take one call, not one each). done is false where the
// chunk is missing, or where its selection lies in many short stretches
// of the file, which reading the chunk whole costs less than.
func (a *Array) readRawRuns(ctx context.Context, ds *DirStore, pc piece, bv view) (done bool, err error) {
	type run struct {
		file   int64
		dst, n int
	}
	var runs []run
	a.rawRuns(pc, bv, func(file int64, dst, n int) error { runs = append(runs, run{file, dst, n}); return nil })
	sel := numElements(pc.sel.count) * bv.es
	stretches := 1
	for i := 1; i < len(runs); i++ {
		if runs[i].file != runs[i-1].file+int64(runs[i-1].n) {
			stretches++
		}
	}
	long := sel/len(runs) >= hostRunMin
	if !long && stretches > 8 && sel/stretches < hostRunMin {
		return false, nil
	}
	f, err := ds.openHost(pc.key)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	defer f.close()
	if err := checkRaw(pc, f.size); err != nil {
		return true, err
	}
	if long {
		for _, r := range runs {
			if err := f.read(ctx, bv.buf[r.dst:r.dst+r.n], r.file); err != nil {
				return true, err
			}
		}
		return true, nil
	}
	iovs := make([][]byte, 0, len(runs))
	for i := 0; i < len(runs); {
		iovs = iovs[:0]
		j := i
		for ; j < len(runs) && (j == i || runs[j].file == runs[j-1].file+int64(runs[j-1].n)); j++ {
			iovs = append(iovs, bv.buf[runs[j].dst:runs[j].dst+runs[j].n])
		}
		if err := ctx.Err(); err != nil {
			return true, err
		}
		if n, err := posix.ReadvFull(f.fd, iovs, runs[i].file); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return true, &fs.PathError{Op: "read", Path: pc.key, Err: fmt.Errorf("%d bytes at offset %d: %w", n, runs[i].file, err)}
		}
		i = j
	}
	return true, nil
}

// readRuns reads an uncompressed chunk run by run straight into the
// region with read (a ranged read that returns the value's size), into
// host or device memory; done is false if the chunk is missing.
func (a *Array) readRuns(pc piece, out view, read func(off int64, dstOff, n int) (int64, error)) (done bool, err error) {
	err = a.rawRuns(pc, out, func(fileOff int64, dstOff, n int) error {
		size, err := read(fileOff, dstOff, n)
		if err == nil {
			err = checkRaw(pc, size)
		}
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // at the first run: the caller fills
	}
	return true, err
}

// rawRuns calls f for each contiguous run of pc in an uncompressed
// chunk: the offset in the chunk, the offset in the region buffer and
// the length.
func (a *Array) rawRuns(pc piece, out view, f func(fileOff int64, dstOff, n int) error) error {
	src := view{shape: pc.shape, es: out.es, start: pc.sel.start}
	return pairRuns(src, out.sub(pc.dstStart), pc.sel.count, func(srcOff, dstOff, n int) error {
		return f(pc.off+int64(srcOff), dstOff, n)
	})
}

// run calls f(ctx, worker, i) for i in [0, n) on up to a.concurrency()
// goroutines and returns the first error. After an error the items not
// started are skipped and ctx, as f sees it, is cancelled, which stops
// the requests in flight.
func (a *Array) run(ctx context.Context, n int, f func(ctx context.Context, worker, i int) error) error {
	return parallel(ctx, n, a.concurrency(), f)
}

// parallel runs f(ctx, worker, i) for i in [0, n) on up to w goroutines;
// see Array.run.
func parallel(parent context.Context, n, w int, f func(ctx context.Context, worker, i int) error) error {
	if n == 0 {
		return parent.Err()
	}
	g, ctx := errgroup.WithContext(parent)
	var next atomic.Int64
	for worker := range max(1, min(w, n)) {
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return nil
				}
				if err := f(ctx, worker, i); err != nil {
					return err
				}
			}
		})
	}
	err := g.Wait()
	if parent.Err() != nil {
		return parent.Err()
	}
	return err
}
