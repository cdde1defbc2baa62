package zarr

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
	"github.com/kvikgo/kvik/internal/kernels"
)

// gpuEncodeBytes is how many bytes of chunks a device write encodes on
// the GPU at once. A launch wants thousands of blocks (the H200 encodes
// 1 GiB of 1 MiB chunks in 64 KiB blocks in 22 ms in launches of 1,024
// chunks, 27 ms in launches of 256), and smaller batches let the
// workers store one while the next encodes: a device write of 1 GiB ran
// at 22.7 GB/s in batches of 256 MiB, 18.4 in batches of 128 MiB (and
// at 20.5, 20.0 and 17.0 in batches of 256 MiB, 512 MiB and 1 GiB
// before one batch encoded while another was copied out).
const gpuEncodeBytes = 256 << 20

// gpuEncodeMin is the fewest bytes of chunks a device write has the GPU
// encode (unless zarrtune.GPUEncodeBytes says otherwise): a launch takes
// milliseconds however few its chunks, in which the cores encode tens
// of megabytes. Against the same writes encoding on the CPU (H200,
// Blosc LZ4, 1 MiB chunks): 16 MiB 0.74x, 36 MiB 1.05x, 64 MiB 1.31x,
// 256 MiB 1.63x, 1 GiB 2.7x.
const gpuEncodeMin = 32 << 20

// gpuBlockSize is the Blosc block size of chunks the GPU encodes where
// the codec leaves it to the encoder (blocksize 0; the CPU's encoder
// takes 256 KiB): a warp compresses a block, so smaller blocks make
// more of them, each done sooner.
const gpuBlockSize = 64 << 10

// gpuBlosc returns the Blosc codec of a's chunks, or of its shards'
// inner chunks, where a device write has the GPU encode them
// (kernels.BloscLZ4): Blosc's "lz4" at a level above 0, with byte
// shuffle or none, of 1, 2, 4 or 8-byte elements stored as they are,
// the chain's (the shards' inner chain's) only codec after the bytes.
func (a *Array) gpuBlosc() (bloscCodec, bool) {
	bc, ok := a.cellPipe().plainThen()
	if !ok || a.cpuEncode || zarrtune.CPUEncode.Load() {
		return bloscCodec{}, false
	}
	es := a.meta.DataType.Size
	c, ok := bc.(bloscCodec)
	ok = ok && c.cname == "lz4" && c.clevel > 0 && c.shuffle != 2 && c.typeSize() == es && len(a.pipe.fill) == es
	return c, ok && (es == 1 || es == 2 || es == 4 || es == 8)
}

// gpuCells returns the boxes, within a chunk, that a device write has
// the GPU encode one by one: the chunk, or its shard's inner chunks in
// the order of the shard's index.
func (a *Array) gpuCells() [][]int {
	s := a.pipe.sharded()
	if s == nil {
		return [][]int{make([]int, len(a.meta.ChunkShape))}
	}
	cells := make([][]int, s.nInner())
	for i := range cells {
		cells[i] = make([]int, len(s.inner))
		unflatten(i, s.perShard, cells[i])
		for d := range cells[i] {
			cells[i][d] *= s.inner[d]
		}
	}
	return cells
}

// cellTask returns the task of the cell at start (a box of a.cellShape())
// of t's chunk, t covering it whole.
func (a *Array) cellTask(t chunkTask, start []int) chunkTask {
	at := make([]int, len(start))
	for d := range start {
		at[d] = t.dstStart[d] + start[d]
	}
	return chunkTask{sel: box{start: make([]int, len(start)), count: a.cellShape()}, dstStart: at}
}

// chunkRows returns where chunk t's bytes lie in the region in: from
// byte off, rows of width bytes pitch apart, where they are so laid out
// (a chunk of a 2-D region always is).
func chunkRows(in view, t chunkTask) (off, rows, width, pitch int, ok bool) {
	n := len(in.shape)
	count := t.sel.count
	j := n - 1
	for j > 0 && count[j] == in.shape[j] {
		j--
	}
	width = in.es
	for k := j; k < n; k++ {
		width *= count[k]
	}
	strides := make([]int, n)
	stride := in.es
	for k := n - 1; k >= 0; k-- {
		strides[k] = stride
		stride *= in.shape[k]
	}
	rows, pitch = 1, width
	for k := range j {
		if count[k] > 1 {
			if rows > 1 {
				return 0, 0, 0, 0, false
			}
			rows, pitch = count[k], strides[k]
		}
	}
	return in.sub(t.dstStart).offset(), rows, width, pitch, true
}

// splitGPU returns the tasks of a write that the GPU encodes (whole
// chunks inside the array; from device memory, where in holds no bytes,
// the rows of each cell evenly apart in the region in, as the kernel
// reads them there) and the others.
func (a *Array) splitGPU(in view, tasks []chunkTask) (gpu, cpu []chunkTask) {
	cells := a.gpuCells()
	for _, t := range tasks {
		ok := a.covers(t) && a.insideArray(t)
		for _, c := range cells {
			if !ok || in.buf != nil {
				break
			}
			_, _, _, _, ok = chunkRows(in, a.cellTask(t, c))
		}
		if ok {
			gpu = append(gpu, t)
		} else {
			cpu = append(cpu, t)
		}
	}
	return gpu, cpu
}

// writeGPU writes tasks, whole chunks of the region in, encoded with c
// on the GPU of target, batch by batch: one goroutine has the GPU encode
// a batch while the chunks of the one before are copied into pinned
// buffers, which the workers store meanwhile (each chunk as Set stores
// it, or deleted where all of it is the fill value and a does not write
// such chunks). The region's bytes are in device memory at src, each
// chunk's rows evenly apart (see splitGPU); or, where src is 0, in host
// memory (in.buf), each batch's chunks gathered into pinned buffers and
// copied to the device while the batch before encodes. It returns the
// tasks it leaves to the CPU: all of them where they are fewer than
// gpuEncodeMin bytes, or the kernel cannot be loaded (an old driver) or
// its memory allocated.
func (a *Array) writeGPU(ctx context.Context, target devmem.Range, in view, tasks []chunkTask, src cuda.DevicePtr, c bloscCodec) ([]chunkTask, error) {
	cells := a.gpuCells()
	k := len(cells) // the GPU's chunks a task
	n := numElements(a.cellShape()) * in.es
	if !a.gpuWorth(len(tasks), k, n) {
		return tasks, nil
	}
	e, err := newGPUEncoding(target, n, len(tasks), k, c, src == 0)
	if err != nil {
		return tasks, nil
	}
	defer e.close()
	var fill [8]byte
	copy(fill[:], a.pipe.fill)
	chunks := make([]kernels.BloscChunk, 0, len(tasks)*k)
	for _, t := range tasks {
		for _, cell := range cells {
			ch := kernels.BloscChunk{Rows: 1, Width: n, Pitch: n, TypeSize: in.es, Shuffle: c.shuffle == 1, Fill: binary.LittleEndian.Uint64(fill[:])}
			if src != 0 {
				off, rows, width, pitch, _ := chunkRows(in, a.cellTask(t, cell))
				ch.Src, ch.Rows, ch.Width, ch.Pitch = src+cuda.DevicePtr(off), rows, width, pitch
			}
			chunks = append(chunks, ch)
		}
	}
	if src == 0 {
		shape := a.cellShape()
		e.gather = func(i int, dst []byte) {
			t := a.cellTask(tasks[i/k], cells[i%k])
			copyBox(view{buf: dst, shape: shape, es: in.es, start: make([]int, len(shape))}, in.sub(t.dstStart), shape)
		}
		e.workers = a.concurrency()
	}
	g, gctx := errgroup.WithContext(ctx)
	ready := make(chan encodedBatch, 1)
	free := make(chan int, len(e.sets))
	for i := range e.sets {
		free <- i
	}
	g.Go(func() error {
		defer close(ready)
		return cuda.WithContext(target.Ctx, func() error {
			return e.run(gctx, chunks, free, func(b encodedBatch) error {
				b.tasks = tasks[b.first/k : (b.first+len(b.vals))/k]
				select {
				case ready <- b:
					return nil
				case <-gctx.Done():
					return gctx.Err()
				}
			})
		})
	})
	g.Go(func() error {
		for b := range ready {
			if err := a.storeEncoded(gctx, b.tasks, b.res, b.vals); err != nil {
				return err
			}
			free <- b.set
		}
		return nil
	})
	return nil, g.Wait()
}

// gpuWorth reports whether tasks of k chunks of n bytes each are enough
// for the GPU to encode (see gpuEncodeMin).
func (a *Array) gpuWorth(tasks, k, n int) bool {
	return tasks > 0 && k <= gpuBatchMost && (tasks*k*n >= gpuEncodeMin || zarrtune.GPUEncodeBytes.Load() > 0)
}

// writeHostGPU has the GPU of SetEncodeDevice encode the whole chunks
// among tasks of a host write from in (see writeGPU) and returns the
// tasks it leaves to the CPU: every one where the array has no such GPU,
// its chunks are not ones the GPU encodes, or no driver is found.
func (a *Array) writeHostGPU(ctx context.Context, in view, tasks []chunkTask) ([]chunkTask, error) {
	c, ok := a.gpuBlosc()
	if a.encodeDev == 0 || !ok {
		return tasks, nil
	}
	gpu, cpu := a.splitGPU(in, tasks)
	if !a.gpuWorth(len(gpu), len(a.gpuCells()), numElements(a.cellShape())*in.es) {
		return tasks, nil
	}
	if cuda.Init() != nil {
		return tasks, nil // no driver: the CPU encodes
	}
	var pctx cuda.Context
	d, err := cuda.DeviceGet(a.encodeDev - 1)
	if err == nil {
		pctx, err = devmem.PrimaryContext(d)
	}
	if err != nil {
		return nil, fmt.Errorf("zarr: encode device %d: %w", a.encodeDev-1, err)
	}
	a.spreadDirs(gpu)
	left, err := a.writeGPU(ctx, devmem.Range{Ctx: pctx, Primary: true}, in, gpu, 0, c)
	return append(cpu, left...), err
}

// gpuEncoding is the memory and streams of a write's chunks encoded on
// the GPU: two batches, so that one encodes while the other's
// chunks are copied out, and two sets of pinned buffers (of a band's
// size, which kvik's pool keeps between writes and reads) that batches'
// chunks are copied into in turn, one set stored while the other fills.
type gpuEncoding struct {
	target  devmem.Range
	per     int
	batches []*kernels.BloscBatch
	streams []cuda.Stream
	size    int
	sets    [2][]*kvik.PinnedBuffer
	// A host write's (gather set): gather copies chunk i of the write
	// into dst, on up to workers goroutines at once; in holds a batch's
	// chunks on the device, batch k gathered into pinned set
	// staged[k%stagedSets] first.
	gather  func(i int, dst []byte)
	workers int
	n       int
	in      []*cuda.DeviceBuffer
	staged  [stagedSets][]*kvik.PinnedBuffer
}

// stagedSets is how many pinned sets a host write's batches are
// gathered into in turn: the workers gather a batch while the one before
// is copied to the device and encoded. Neither three sets (1 GiB at
// 13.96-13.98 GB/s, two sets 13.96-14.22, H200) nor each batch's span of
// the region's rows copied whole for the GPU to gather its chunks from
// (0.61 of the device write's pace, the chunks gathered one by one 0.60)
// made such a write faster.
const stagedSets = 2

// gpuBatchMost is the most chunks a batch of the GPU's encodes.
const gpuBatchMost = 1024

// newGPUEncoding loads the kernel and allocates batches for tasks of k
// chunks of n bytes each (a batch holds whole tasks) in c's blocks (one
// batch where a second does not fit), and, for a host write, the device
// and pinned memory its chunks are staged through.
func newGPUEncoding(target devmem.Range, n, tasks, k int, c bloscCodec, host bool) (*gpuEncoding, error) {
	bs := c.blocksize
	if bs <= 0 {
		bs = tuned(gpuBlockSize, &zarrtune.GPUEncodeBlock)
	}
	bs = min(bs, n)
	bs -= bs % c.typeSize()
	per := min(tasks*k, gpuBatchMost, max(k, tuned(gpuEncodeBytes, &zarrtune.GPUEncodeBytes)/(n+16)))
	e := &gpuEncoding{target: target, per: per - per%k, size: max(bandTarget, n+16), n: n}
	err := cuda.WithContext(target.Ctx, func() error {
		enc, err := kernels.LoadBloscLZ4(target.Ctx)
		if err != nil {
			return err
		}
		for i := range min(2, (tasks*k+e.per-1)/e.per) {
			b, err := enc.NewBatch(e.per, n, bs)
			if err != nil && i > 0 {
				break // one batch, the copies after the encodes
			}
			if err != nil {
				return err
			}
			if host {
				in, err := cuda.MemAlloc(e.per * n)
				if err != nil {
					b.Close()
					if i > 0 {
						break
					}
					return err
				}
				e.in = append(e.in, in)
			}
			e.batches = append(e.batches, b)
			s, err := devmem.GetStream(target.Ctx, target.Primary)
			if err != nil {
				return err
			}
			e.streams = append(e.streams, s)
		}
		for k := range e.staged {
			for range e.stagedBuffers(host) {
				p, err := kvik.GetPinnedBuffer(e.size)
				if err != nil {
					return err
				}
				e.staged[k] = append(e.staged[k], p)
			}
		}
		// Buffers for half the chunks' bytes (Blosc LZ4 rarely keeps
		// more) are taken now: a buffer pinned while a kernel runs waits
		// for it, and keeps the next from running beside it.
		for k := range e.sets {
			for range (e.per*(n+16)/2 + e.size - 1) / e.size {
				p, err := kvik.GetPinnedBuffer(e.size)
				if err != nil {
					return err
				}
				e.sets[k] = append(e.sets[k], p)
			}
		}
		return nil
	})
	if err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// stagedBuffers returns how many pinned buffers a set of a host write's
// staged chunks takes (none for a device write): a batch's chunks, each
// within one buffer.
func (e *gpuEncoding) stagedBuffers(host bool) int {
	if !host {
		return 0
	}
	each := e.size / e.n
	return (e.per + each - 1) / each
}

// gatherBatch gathers batch k's n chunks (chunk first of the write on)
// into pinned set k%stagedSets on the workers.
func (e *gpuEncoding) gatherBatch(ctx context.Context, k, first, n int) error {
	set, each := e.staged[k%stagedSets], e.size/e.n
	return parallel(ctx, n, e.workers, func(_ context.Context, _, i int) error {
		at := i % each * e.n
		e.gather(first+i, set[i/each].Bytes()[at:at+e.n])
		return nil
	})
}

// upload queues the copy of batch k's chunks, gathered, from their
// pinned set to the device on stream s and points them at it; the
// context must be current. The device memory is free: the batch that
// used it last runs before on s.
func (e *gpuEncoding) upload(k int, s cuda.Stream, chunks []kernels.BloscChunk) error {
	set, in, each := e.staged[k%stagedSets], e.in[k%len(e.in)], e.size/e.n
	for j := 0; j*each < len(chunks); j++ {
		m := min(each, len(chunks)-j*each)
		if err := cuda.MemcpyHtoDAsync(in.Ptr()+cuda.DevicePtr(j*each*e.n), set[j].Bytes()[:m*e.n], s); err != nil {
			return err
		}
	}
	for i := range chunks {
		chunks[i].Src = in.Ptr() + cuda.DevicePtr(i*e.n)
	}
	return nil
}

// stager gathers a host write's batches ahead of the GPU on a goroutine
// of its own: batch k into pinned set k%stagedSets once the copy to the
// device of the batch that used the set before is done (freed), each
// batch's end sent on gathered in turn.
type stager struct {
	gathered chan error
	freed    chan struct{}
	quit     chan struct{}
	exited   chan struct{}
}

// startStaging starts gathering the batches of a host write of n
// chunks.
func (e *gpuEncoding) startStaging(ctx context.Context, n int) *stager {
	st := &stager{gathered: make(chan error, stagedSets), freed: make(chan struct{}, stagedSets), quit: make(chan struct{}), exited: make(chan struct{})}
	for range stagedSets {
		st.freed <- struct{}{}
	}
	go func() {
		defer close(st.exited)
		for k := range (n + e.per - 1) / e.per {
			select {
			case <-st.freed:
			case <-st.quit:
				return
			}
			err := e.gatherBatch(ctx, k, k*e.per, min(e.per, n-k*e.per))
			st.gathered <- err // room for each set's: a batch waits for a free set
			if err != nil {
				return
			}
		}
	}()
	return st
}

// wait waits for the next batch's gathering.
func (st *stager) wait(ctx context.Context) error {
	select {
	case err := <-st.gathered:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop ends the gathering and waits for its goroutine, which then
// touches no pinned set.
func (st *stager) stop() {
	close(st.quit)
	<-st.exited
}

// encodedBatch is the chunks of a batch, from chunk first of a write's,
// encoded and copied into pinned set set.
type encodedBatch struct {
	first int
	tasks []chunkTask
	res   []kernels.BloscResult
	vals  [][]byte
	set   int
}

// run encodes chunks batch by batch, launching each batch's encoding
// before the chunks of the one before are copied out, and hands each
// batch, copied, to done; the context must be current.
func (e *gpuEncoding) run(ctx context.Context, chunks []kernels.BloscChunk, free chan int, done func(encodedBatch) error) error {
	batch := func(k int) []kernels.BloscChunk {
		return chunks[k*e.per : min((k+1)*e.per, len(chunks))]
	}
	launch := func(k int) error {
		return e.batches[k%len(e.batches)].Launch(e.streams[k%len(e.streams)], batch(k))
	}
	// A host write's batches are gathered ahead (st) and copied to the
	// device on their streams, the next while this one encodes.
	var st *stager
	if e.gather != nil {
		st = e.startStaging(ctx, len(chunks))
		defer st.stop()
	}
	upload := func(k int) error {
		if st == nil {
			return nil
		}
		if err := st.wait(ctx); err != nil {
			return err
		}
		return e.upload(k, e.streams[k%len(e.streams)], batch(k))
	}
	count := (len(chunks) + e.per - 1) / e.per
	if err := upload(0); err != nil {
		return err
	}
	if err := launch(0); err != nil {
		return err
	}
	for k := range count {
		if k+1 < count {
			if err := upload(k + 1); err != nil {
				return err
			}
		}
		b, s := e.batches[k%len(e.batches)], e.streams[k%len(e.streams)]
		res, err := b.Results(s)
		if err != nil {
			return err
		}
		if st != nil {
			st.freed <- struct{}{} // batch k's copy to the device is done
		}
		if k+1 < count && len(e.batches) > 1 {
			if err := launch(k + 1); err != nil {
				return err
			}
		}
		var set int
		select {
		case set = <-free:
		case <-ctx.Done():
			return ctx.Err()
		}
		eb, err := e.copyOut(s, res, set)
		if err != nil {
			return err
		}
		eb.first = k * e.per
		if k+1 < count && len(e.batches) == 1 {
			if err := launch(k + 1); err != nil {
				return err
			}
		}
		if err := done(eb); err != nil {
			return err
		}
	}
	return nil
}

// copyOut copies the chunks of res into pinned set set on stream s, a
// chunk's bytes within one buffer, and waits for them.
func (e *gpuEncoding) copyOut(s cuda.Stream, res []kernels.BloscResult, set int) (encodedBatch, error) {
	b := encodedBatch{res: res, vals: make([][]byte, len(res)), set: set}
	k, at := 0, e.size
	for i, r := range res {
		if at+r.Size > e.size {
			if k == len(e.sets[set]) {
				p, err := kvik.GetPinnedBuffer(e.size)
				if err != nil {
					return b, err
				}
				e.sets[set] = append(e.sets[set], p)
			}
			k, at = k+1, 0
		}
		mem := e.sets[set][k-1].Bytes()
		b.vals[i] = mem[at : at+r.Size : at+r.Size]
		at += r.Size
		if err := cuda.MemcpyDtoHAsync(b.vals[i], r.Out, s); err != nil {
			return b, err
		}
	}
	return b, cuda.StreamSynchronize(s)
}

// close waits for the streams and gives the batches, the streams and the
// pinned buffers back.
func (e *gpuEncoding) close() {
	cuda.WithContext(e.target.Ctx, func() error {
		for _, s := range e.streams {
			cuda.StreamSynchronize(s) // a failed run may have left work queued
			devmem.PutStream(e.target.Ctx, e.target.Primary, s)
		}
		for _, b := range e.batches {
			b.Close()
		}
		for _, in := range e.in {
			in.Close()
		}
		for _, set := range append(e.sets[:], e.staged[:]...) {
			for _, p := range set {
				p.Release()
			}
		}
		return nil
	})
}

// gpuEncodedChunks counts the chunks the GPU encoded that were stored,
// for the tests.
var gpuEncodedChunks atomic.Int64

// storeEncoded stores the chunks of tasks, encoded as vals (res says
// which hold anything but the fill value; for a sharded array, a task's
// inner chunks in turn, those that do not left out of its shard), on the
// workers: each under its key's lock, or deleted where all of it is the
// fill value and a does not write such chunks.
func (a *Array) storeEncoded(ctx context.Context, tasks []chunkTask, res []kernels.BloscResult, vals [][]byte) error {
	k := len(res) / max(len(tasks), 1)
	return a.run(ctx, len(tasks), func(ctx context.Context, _, i int) error {
		key := a.ChunkKey(tasks[i].coords)
		unlock, err := a.lockChunk(ctx, key)
		if err != nil {
			return err
		}
		defer unlock()
		v, stored := a.encodedValue(res[i*k:(i+1)*k], vals[i*k:(i+1)*k])
		if !stored && !a.writeEmpty {
			return a.store.Delete(ctx, key)
		}
		gpuEncodedChunks.Add(1)
		if a.keepsValues() && v != nil && overlaps(v, vals[i*k]) {
			v = bytes.Clone(v) // the pinned buffer is the next batch's
		}
		return a.store.Set(ctx, key, v)
	})
}

// encodedValue returns the value of a chunk the GPU encoded as vals: the
// chunk itself, or a shard of the inner chunks that hold anything but
// the fill value; and whether any does.
func (a *Array) encodedValue(res []kernels.BloscResult, vals [][]byte) ([]byte, bool) {
	s := a.pipe.sharded()
	if s == nil {
		return vals[0], res[0].Differs
	}
	enc := make([][]byte, len(vals))
	stored := false
	for i, r := range res {
		if r.Differs {
			enc[i], stored = vals[i], true
		}
	}
	return s.assemble(enc, nil), stored
}
