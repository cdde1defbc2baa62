package zarr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"

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

// concurrency returns how many pieces are handled at once: a.workers
// decoding, plus the requests a remote store keeps in flight meanwhile.
func (a *Array) concurrency() int {
	n := a.workers
	if r, ok := a.store.(interface{ MaxRequests() int }); ok {
		n += r.MaxRequests()
	}
	return n
}

// plan lists the pieces of region r: one per chunk, or for a sharded
// array the inner chunks it needs, after reading the shard indexes.
func (a *Array) plan(ctx context.Context, r box) ([]piece, error) {
	var pieces []piece
	forChunks(a.meta.ChunkShape, a.grid, r, func(t chunkTask) error {
		pieces = append(pieces, piece{key: a.ChunkKey(t.coords), n: -1, pipe: a.pipe, shape: a.meta.ChunkShape, sel: t.sel, dstStart: t.dstStart})
		return nil
	})
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

// shardPieces reads the index of the shard of pc and returns the inner
// chunks pc's selection needs. Sizes the index gives are checked before
// anything is allocated for them: an uncompressed inner chunk must have
// its exact size, others at most storedLimit.
func (a *Array) shardPieces(ctx context.Context, s *shardingCodec, pc piece) ([]piece, error) {
	idx, err := s.readShardIndex(ctx, a.store, pc.key)
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
		p := piece{key: pc.key, off: int64(e[0]), n: int64(e[1]), pipe: s.codecs, shape: s.inner, sel: t.sel, dstStart: dst}
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
		b, err = getChunk(ctx, a.store, pc.key, buf, a.meta.ChunkShape, a.meta.DataType.Size)
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
// nil, is the destination of the whole decoded piece, in order.
func (a *Array) decodeInto(pc piece, b []byte, d view, place []byte) error {
	if place != nil && pc.pipe.sharded() == nil {
		c, err := pc.pipe.decode(b, pc.shape, place)
		if err != nil {
			return fmt.Errorf("chunk %s: %w", pc.key, err)
		}
		if len(c.data) > 0 && &c.data[0] != &place[0] {
			copy(place, c.data)
		}
		return nil
	}
	if err := pc.pipe.readRegion(bytesReader(b), pc.shape, pc.sel, d); err != nil {
		return fmt.Errorf("chunk %s: %w", pc.key, err)
	}
	return nil
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
// fetched and decoded concurrently (see SetWorkers); missing chunks read
// as the fill value. Cancelling ctx stops the reads in flight.
func (a *Array) ReadRegion(ctx context.Context, start, stop []int, dst []byte) error {
	r, size, err := a.region(start, stop)
	if err != nil {
		return err
	}
	if len(dst) != size {
		return fmt.Errorf("%w: buffer of %d bytes for a %d-byte region", ErrInvalidRegion, len(dst), size)
	}
	pieces, err := a.plan(ctx, r)
	if err != nil {
		return err
	}
	out := view{buf: dst, shape: r.count, es: a.meta.DataType.Size}
	spans := a.spans(pieces, out, true)
	return a.run(ctx, len(spans), func(ctx context.Context, _, i int) error {
		return a.readSpanHost(ctx, spans[i], out)
	})
}

// hostRunMin is the average run length from which uncompressed chunks of
// a local store are read run by run into the destination rather than
// whole and copied. Remote stores always fetch whole chunks: a request
// per run costs more than the bytes it saves.
const hostRunMin = 64 << 10

func (a *Array) readPieceHost(ctx context.Context, pc piece, out view) error {
	d := out.sub(pc.dstStart)
	place := hostPlace(pc, out) // the destination of the whole decoded piece
	if ds, ok := a.store.(*DirStore); ok && place == nil && pc.pipe.raw() && pc.n < 0 && !pc.missing {
		runs := 0
		a.rawRuns(pc, out, func(int64, int, int) error { runs++; return nil })
		if numElements(pc.sel.count)*out.es/runs >= hostRunMin {
			f, size, err := ds.openValue(pc.key)
			if err == nil {
				defer f.Close()
				done, err := a.readRuns(pc, out, func(off int64, dstOff, n int) (int64, error) {
					return size, readFull(ctx, f, pc.key, out.buf[dstOff:dstOff+n], off)
				})
				if done || err != nil {
					return err
				}
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return a.decodePiece(ctx, pc, d, place)
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
