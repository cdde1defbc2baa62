package zarr

import (
	"context"
	"fmt"
	"slices"

	"github.com/kvikgo/kvik"
)

// span is one read of stored bytes: a single piece (a whole chunk, a
// missing one, or one inner chunk), or the bytes [off, off+n) of a shard
// that hold the inner chunks of several pieces, in order of offset,
// fetched with one ranged read. A sharded region read costs a request
// per span instead of one per inner chunk.
type span struct {
	key    string
	off, n int64
	pieces []piece
	// direct: the pieces are uncompressed, wanted whole, and lie back to
	// back in the store and in the region from dstOff, so that the
	// span's bytes are read straight into the region.
	direct bool
	dstOff int
	// lo, hi, when hi > 0: the span's shard is [lo, hi) (lo 0, hi its
	// size) and holds little else, so that a remote store asks for the
	// shard whole (see readSpan).
	lo, hi int64
}

// single reports whether the span is one piece read as it is.
func (sp *span) single() bool { return len(sp.pieces) == 1 }

// Span sizes. spanGap is the most unneeded stored bytes read to join two
// ranges into one request. A span is at most spanMax bytes when read
// straight into the region (it allocates nothing) and at most TaskSize
// when its bytes are buffered; below those, spans are made small enough
// that the region's requests keep every request slot busy (two per
// slot), but not below spanMin.
const (
	spanGap = 64 << 10
	spanMin = 1 << 20
	spanMax = 64 << 20
)

// spanSizes returns the largest direct and buffered spans for pieces,
// the pieces of one band of a read that has up to together bands in
// flight at once. A remote store's request slots are shared by those
// bands: sized for one band of 32 MiB, the spans of a device read were
// single 1 MiB inner chunks, and versitygw served such range requests
// at 0.3x the rate of whole 1 MiB objects (a sharded array read at 0.3x
// the same array unsharded).
func (a *Array) spanSizes(pieces []piece, together int) (direct, buffered int64) {
	var total int64
	for _, p := range pieces {
		if p.n > 0 && !p.missing {
			total += p.n
		}
	}
	req := a.workers
	if slots, ok := requestSlots(a.store); ok {
		// Spans for the workers' requests, not for every slot: more,
		// smaller range requests cost a server more per byte (versitygw
		// served 1 MiB ranges at half the rate of 4 MiB ones), and the
		// bands in flight give the other slots spans of their own.
		req = min(slots, a.workers)
		total *= int64(max(together, 1))
	}
	per := total / int64(2*max(req, 1))
	d, _ := kvik.GetDefaults()
	buffered = min(max(per, spanMin), int64(max(d.TaskSize, spanMin)))
	direct = min(max(per, buffered), spanMax)
	return direct, buffered
}

// spans groups the pieces of a plan into reads: inner chunks of one
// shard whose byte ranges lie within spanGap of each other are read
// together, up to the sizes of spanSizes. chain allows direct spans
// (see span.direct); a device read allows them only where the store can
// read into device memory. together is as for spanSizes.
func (a *Array) spans(pieces []piece, out view, chain bool, together int) []span {
	bigMax, smallMax := a.spanSizes(pieces, together)
	var spans []span
	var ranged []piece
	flush := func() {
		first := len(spans)
		slices.SortStableFunc(ranged, func(x, y piece) int {
			switch {
			case x.off < y.off:
				return -1
			case x.off > y.off:
				return 1
			}
			return 0
		})
		cur := -1 // index in spans of the span being built
		dstEnd := 0
		chainMax := a.wholeChain(ranged, bigMax)
		for _, p := range ranged {
			dstOff, direct := directPiece(p, out)
			direct = direct && chain
			if cur >= 0 {
				sp := &spans[cur]
				end := sp.off + sp.n
				newEnd := max(end, p.off+p.n)
				chained := sp.direct && direct && p.off == end && dstOff == dstEnd
				limit := smallMax
				switch {
				case chained:
					limit = max(bigMax, chainMax)
				case sp.direct && sp.n >= spanGap || !sp.direct && direct && p.n >= spanGap:
					// Buffering a large direct part to save a request
					// costs more than the request.
					limit = 0
				}
				if p.off <= end+spanGap && newEnd-sp.off <= limit {
					sp.n = newEnd - sp.off
					sp.pieces = append(sp.pieces, p)
					sp.direct = chained
					dstEnd = dstOff + int(p.n)
					continue
				}
			}
			spans = append(spans, span{key: p.key, off: p.off, n: p.n, pieces: []piece{p}, direct: direct, dstOff: dstOff})
			cur = len(spans) - 1
			dstEnd = dstOff + int(p.n)
		}
		for i := first; i < len(spans); i++ {
			spans[i].wholeShard()
		}
		ranged = ranged[:0]
	}
	for _, p := range pieces {
		if len(ranged) > 0 && p.key != ranged[0].key {
			flush()
		}
		if p.n < 0 || p.missing {
			spans = append(spans, span{key: p.key, off: p.off, n: p.n, pieces: []piece{p}})
			continue
		}
		ranged = append(ranged, p)
	}
	flush()
	return spans
}

// wholeChain returns how long a direct span may grow among ranged, the
// pieces of one shard in order of offset, for a remote store to read the
// shard with one request where the region wants all of it but spanGap
// bytes (wholeShard): up to spanMax with WithWholeShards, else up to
// twice aim, the direct span size the read aims for (so that of the two
// requests per slot it aims for, at least one remains); else 0.
func (a *Array) wholeChain(ranged []piece, aim int64) int64 {
	if _, ok := requestSlots(a.store); !ok || len(ranged) < 2 || ranged[0].size <= 0 {
		return 0
	}
	end := int64(0)
	for _, p := range ranged {
		end = max(end, p.off+p.n)
	}
	extent := end - ranged[0].off
	limit := min(2*aim, spanMax)
	if w, ok := a.store.(interface{ wholeShards() bool }); ok && w.wholeShards() {
		limit = spanMax
	}
	if ranged[0].size-extent > spanGap || extent > limit {
		return 0
	}
	return extent
}

// wholeShard sets sp.lo and sp.hi when sp, of several inner chunks,
// leaves no more than spanGap bytes of its shard unread (its index and
// little else).
func (sp *span) wholeShard() {
	size := sp.pieces[0].size
	if !sp.single() && size > 0 && size-sp.n <= spanGap {
		sp.lo, sp.hi = 0, size
	}
}

// readSpan reads the bytes of sp into p, with one request for its whole
// shard where sp asks for one and the store can (a remote store: a
// server may send a whole object straight from its file where a part
// of it takes a copy; versitygw does), calling progress (when not nil,
// and the store can) with the count of p's bytes in each time it grows.
// A shard whose size is not the one its index was read with has changed
// since: ErrCorruptChunk.
func (a *Array) readSpan(ctx context.Context, sp *span, p []byte, progress func(n int)) error {
	w, ok := a.store.(interface {
		readRangeFunc(ctx context.Context, key string, off int64, p []byte, lo, hi int64, progress func(n int)) (int64, error)
	})
	if !ok || sp.hi == 0 && progress == nil {
		_, err := a.store.ReadRange(ctx, sp.key, sp.off, p)
		return err
	}
	size, err := w.readRangeFunc(ctx, sp.key, sp.off, p, sp.lo, sp.hi, progress)
	if err == nil && sp.hi > 0 && size != sp.hi {
		err = fmt.Errorf("%w: %s: shard of %d bytes, of %d when its index was read", ErrCorruptChunk, sp.key, size, sp.hi)
	}
	return err
}

// directPiece returns where p starts in the region, and whether its
// stored bytes are its place there: uncompressed (of the right size,
// which shardPieces checked), wanted whole, contiguous in the region.
func directPiece(p piece, out view) (int, bool) {
	if !p.pipe.raw() || p.missing || p.n < 0 || !p.whole() || !contiguous(out, p.dstStart, p.sel.count) {
		return 0, false
	}
	return out.sub(p.dstStart).offset(), true
}

// hostPlace returns the memory of pc's selection in the region when it
// is the whole piece and contiguous there, else nil.
func hostPlace(pc piece, out view) []byte {
	if !pc.whole() || !contiguous(out, pc.dstStart, pc.sel.count) {
		return nil
	}
	off, n := out.sub(pc.dstStart).offset(), numElements(pc.sel.count)*out.es
	return out.buf[off : off+n : off+n]
}

// fetchSpan does the I/O of span i of band b (see bandWork): one ranged
// read, straight into place for a direct span, else into a pooled buffer
// whose inner chunks decodeSpan decodes. With emit, a span read in parts
// (spanParts) hands each run of parts over as its bytes are in, while
// the rest come (emit(f, k): parts [0, k) of f can be decoded).
func (a *Array) fetchSpan(ctx context.Context, b *band, i int, emit func(f fetched, k int)) (fetched, error) {
	sp := &b.spans[i]
	es := a.meta.DataType.Size
	if sp.single() {
		return a.fetchPiece(ctx, sp.pieces[0], b.pieceView(es, i, 0))
	}
	if sp.direct {
		off := sp.dstOff
		if b.slots != nil {
			off = b.slots[i][0] // the pieces' slots are back to back
		}
		return fetched{done: true}, a.readSpan(ctx, sp, b.buf[off:off+int(sp.n)], nil)
	}
	p := getBuf(int(sp.n))
	f := fetched{p: p, b: *p}
	var progress func(n int)
	sent := 0 // parts handed over
	if n := a.spanParts(b, i); emit != nil && n > 1 {
		ends := sp.partEnds(n)
		progress = func(got int) {
			k := sent
			for k < n && int64(got) >= ends[k] {
				k++
			}
			if k > sent {
				emit(f, k)
				sent = k
			}
		}
	}
	if err := a.readSpan(ctx, sp, *p, progress); err != nil {
		if sent == 0 {
			putBuf(p) // else parts handed over may still be decoding
		}
		return fetched{}, err
	}
	return f, nil
}

// partEnds returns, for each of n parts of sp (fetched.pieces), the
// count of sp's bytes that hold it and every part before it.
func (sp *span) partEnds(n int) []int64 {
	ends := make([]int64, n)
	var end int64
	for k := range n {
		from, to := (fetched{part: k, parts: n}).pieces(len(sp.pieces))
		for _, pc := range sp.pieces[from:to] {
			end = max(end, pc.off+pc.n-sp.off)
		}
		ends[k] = end
	}
	return ends
}

// decodeSpan decodes what fetchSpan fetched of span i of band b (the
// pieces of f's part) into their places, on up to inner goroutines when
// compressed; one at a time, it yields between them when yield is set
// (a remote read: see yieldProc).
func (a *Array) decodeSpan(ctx context.Context, b *band, i int, f fetched, inner int, yield bool) error {
	if f.done {
		return nil
	}
	sp := &b.spans[i]
	es := a.meta.DataType.Size
	one := func(j int, stored []byte) error {
		pc, bv := sp.pieces[j], b.pieceView(es, i, j)
		place := hostPlace(pc, bv)
		if _, ok := pc.pipe.bloscFirst(); ok && b.shuf != nil && place != nil {
			sh, err := pc.pipe.decodeShuffled(stored, place)
			if err != nil {
				return fmt.Errorf("chunk %s: %w", pc.key, err)
			}
			b.shuf[i][j] = pieceShuffle{sh, b.pieceOff(es, i, j)}
			return nil
		}
		return a.decodeStored(pc, stored, bv.sub(pc.dstStart), place)
	}
	if sp.single() {
		return one(0, f.b)
	}
	from, to := f.pieces(len(sp.pieces))
	if sp.pieces[0].pipe.raw() || inner <= 1 {
		for j := from; j < to; j++ {
			if yield && j > from {
				yieldProc()
			}
			if err := one(j, sp.bytes(f.b, sp.pieces[j])); err != nil {
				return err
			}
		}
		return nil
	}
	return parallel(ctx, to-from, inner, func(_ context.Context, _, j int) error {
		return one(from+j, sp.bytes(f.b, sp.pieces[from+j]))
	})
}

// bytes returns pc's stored bytes in buf, the bytes of sp.
func (sp *span) bytes(buf []byte, pc piece) []byte {
	o := pc.off - sp.off
	return buf[o : o+pc.n : o+pc.n]
}

// decodeStored writes the selection of pc, whose stored bytes are b,
// into hv (a view of the region or of a buffer of the selection's
// shape); place, when not nil, is the memory of the whole decoded piece.
func (a *Array) decodeStored(pc piece, b []byte, hv view, place []byte) error {
	if !pc.pipe.raw() {
		return a.decodeInto(pc, b, hv, place)
	}
	if err := checkRaw(pc, int64(len(b))); err != nil {
		return err
	}
	switch {
	case place == nil:
		copyBox(hv, view{buf: b, shape: pc.shape, es: hv.es, start: pc.sel.start}, pc.sel.count)
	case len(b) > 0 && &b[0] != &place[0]:
		copy(place, b)
	}
	return nil
}
