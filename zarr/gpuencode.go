package zarr

import (
	"bytes"
	"context"
	"encoding/binary"

	"golang.org/x/sync/errgroup"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
	"github.com/kvikgo/kvik/internal/kernels"
)

// gpuEncodeBytes is how many bytes of chunks a device write encodes on
// the GPU at once: a launch wants hundreds of chunks (the H200 encodes
// 1 GiB of 1 MiB chunks in 31 ms in launches of 1,024, in 85 ms in
// launches of 256).
const gpuEncodeBytes = 512 << 20

// gpuBlosc returns a's Blosc codec where a device write encodes a's
// chunks on the GPU (kernels.BloscLZ4): Blosc's "lz4" at a level above
// 0, with byte shuffle or none, of 1, 2, 4 or 8-byte elements stored as
// they are, the chain's only codec after the bytes.
func (a *Array) gpuBlosc() (bloscCodec, bool) {
	p, es := a.pipe, a.meta.DataType.Size
	b, ok := p.ab.(bytesCodecAB)
	if !ok || len(p.aa) > 0 || len(p.bb) != 1 || (b.big && b.unit > 1) || zarrtune.CPUEncode.Load() {
		return bloscCodec{}, false
	}
	c, ok := p.bb[0].(bloscCodec)
	ok = ok && c.cname == "lz4" && c.clevel > 0 && c.shuffle != 2 && c.typeSize() == es && len(p.fill) == es
	return c, ok && (es == 1 || es == 2 || es == 4 || es == 8)
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

// splitGPU returns the tasks of a device write that the GPU encodes
// (whole chunks inside the array, their rows evenly apart in the
// region in) and the others.
func (a *Array) splitGPU(in view, tasks []chunkTask) (gpu, cpu []chunkTask) {
	for _, t := range tasks {
		if _, _, _, _, ok := chunkRows(in, t); ok && a.covers(t) && a.insideArray(t) {
			gpu = append(gpu, t)
		} else {
			cpu = append(cpu, t)
		}
	}
	return gpu, cpu
}

// writeGPU writes tasks, whole chunks of the region in whose bytes are
// in device memory at src, encoded with c on the GPU, batch by batch:
// one goroutine encodes a batch's chunks and copies them into pinned
// buffers, while the workers store the batch before (each chunk as Set
// stores it, or deleted where all of it is the fill value and a does
// not write such chunks). It returns the tasks it leaves to the CPU: all
// of them where the kernel cannot be loaded (an old driver) or its
// device memory allocated.
func (a *Array) writeGPU(ctx context.Context, target devmem.Range, in view, tasks []chunkTask, src cuda.DevicePtr, c bloscCodec) ([]chunkTask, error) {
	es := in.es
	n := numElements(a.meta.ChunkShape) * es
	bs := c.blocksize
	if bs <= 0 {
		bs = 256 << 10 // as the CPU's encoder
	}
	bs = min(bs, n)
	bs -= bs % es
	limit := gpuEncodeBytes
	if v := zarrtune.GPUEncodeBytes.Load(); v > 0 {
		limit = int(v)
	}
	per := min(len(tasks), 1024, max(1, limit/(n+16)))
	var batch *kernels.BloscBatch
	err := cuda.WithContext(target.Ctx, func() error {
		k, err := kernels.LoadBloscLZ4(target.Ctx)
		if err == nil {
			batch, err = k.NewBatch(per, n, bs)
		}
		return err
	})
	if err != nil {
		return tasks, nil
	}
	defer batch.Close()
	var fill [8]byte
	copy(fill[:], a.pipe.fill)
	e := &gpuEncoding{target: target, batch: batch, size: max(bandTarget, n+16)}
	defer e.release()
	g, gctx := errgroup.WithContext(ctx)
	ready := make(chan encodedBatch, 1)
	free := make(chan int, len(e.sets))
	for i := range e.sets {
		free <- i
	}
	g.Go(func() error {
		defer close(ready)
		return cuda.WithContext(target.Ctx, func() error {
			s, err := devmem.GetStream(target.Ctx, target.Primary)
			if err != nil {
				return err
			}
			defer devmem.PutStream(target.Ctx, target.Primary, s)
			chunks := make([]kernels.BloscChunk, 0, per)
			for at := 0; at < len(tasks); at += per {
				ts := tasks[at:min(at+per, len(tasks))]
				chunks = chunks[:0]
				for _, t := range ts {
					off, rows, width, pitch, _ := chunkRows(in, t)
					chunks = append(chunks, kernels.BloscChunk{Src: src + cuda.DevicePtr(off), Rows: rows, Width: width, Pitch: pitch,
						TypeSize: es, Shuffle: c.shuffle == 1, Fill: binary.LittleEndian.Uint64(fill[:])})
				}
				var set int
				select {
				case set = <-free:
				case <-gctx.Done():
					return gctx.Err()
				}
				b, err := e.encode(s, chunks, set)
				if err != nil {
					return err
				}
				b.tasks = ts
				select {
				case ready <- b:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			return nil
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

// gpuEncoding is the memory of a device write's chunks encoded on the
// GPU: the batch's device memory, and two sets of pinned buffers
// (of bands' size, which kvik's pool keeps between writes and reads)
// the batches' chunks are copied into in turn.
type gpuEncoding struct {
	target devmem.Range
	batch  *kernels.BloscBatch
	size   int
	sets   [2][]*kvik.PinnedBuffer
}

// encodedBatch is a batch of chunks encoded into pinned set set.
type encodedBatch struct {
	tasks []chunkTask
	res   []kernels.BloscResult
	vals  [][]byte
	set   int
}

// encode encodes chunks on stream s and copies them into pinned set set,
// a chunk's bytes within one buffer; the context must be current.
func (e *gpuEncoding) encode(s cuda.Stream, chunks []kernels.BloscChunk, set int) (encodedBatch, error) {
	res, err := e.batch.Encode(s, chunks)
	if err != nil {
		return encodedBatch{}, err
	}
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

// release gives the pinned buffers back to kvik's pool.
func (e *gpuEncoding) release() {
	cuda.WithContext(e.target.Ctx, func() error {
		for _, set := range e.sets {
			for _, p := range set {
				p.Release()
			}
		}
		return nil
	})
}

// storeEncoded stores the chunks of tasks, encoded as vals, on the
// workers: each under its key's lock, or deleted where res says all of
// it is the fill value and a does not write such chunks.
func (a *Array) storeEncoded(ctx context.Context, tasks []chunkTask, res []kernels.BloscResult, vals [][]byte) error {
	return a.run(ctx, len(tasks), func(ctx context.Context, _, i int) error {
		key := a.ChunkKey(tasks[i].coords)
		unlock, err := a.lockChunk(ctx, key)
		if err != nil {
			return err
		}
		defer unlock()
		if !res[i].Differs && !a.writeEmpty {
			return a.store.Delete(ctx, key)
		}
		v := vals[i]
		if a.keepsValues() {
			v = bytes.Clone(v) // the pinned buffer is the next batch's
		}
		return a.store.Set(ctx, key, v)
	})
}
