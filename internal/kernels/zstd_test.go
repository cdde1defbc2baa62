package kernels

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/libzstd"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// zstdGuard is the canary around each destination of TestZstd: bytes a
// decode must leave as they are.
const zstdGuard = 64

// TestZstd decodes on the GPU, in batches of random sizes, the frames
// of TestZstdModel (klauspost/compress's and libzstd's, with corrupted
// ones, destinations too small and a frame with a checksum): every
// valid frame to its data; every other one to -1 or, where the CPU
// model (testdata/zstd_host.c, where gcc is) decodes it, to the model's
// bytes; no byte written around any destination.
func TestZstd(t *testing.T) {
	ctx := gputest.Primary(t, 0)
	rng := rand.New(rand.NewPCG(3, 14))
	cases := zstdCases(t, rng, 160)
	model := map[int][]byte{} // the CPU's decodes of the frames that are not valid
	if gcc, err := exec.LookPath("gcc"); err == nil && gcc != "" {
		model = hostDecodes(t, cases)
	}
	checkDecodes(t, ctx, func() (Decoder, error) { return LoadZstd(ctx) }, rng, cases, model)
}

// checkDecodes decodes cases on the GPU with the decoder load returns, in
// batches of random sizes: every valid frame to its data; every other
// one to -1 or, where model (the CPU model's decodes, by case) has it,
// to the model's bytes; no byte written around any destination.
func checkDecodes(t *testing.T, ctx cuda.Context, load func() (Decoder, error), rng *rand.Rand, cases []zstdCase, model map[int][]byte) {
	var srcLen, dstLen int
	for _, c := range cases {
		srcLen += len(c.frame)
		dstLen += c.cap + zstdGuard
	}
	err := cuda.WithContext(ctx, func() error {
		z, err := load()
		if err != nil {
			return err
		}
		src, err := cuda.MemAlloc(max(srcLen, 1))
		if err != nil {
			return err
		}
		defer src.Close()
		dst, err := cuda.MemAlloc(dstLen + zstdGuard)
		if err != nil {
			return err
		}
		defer dst.Close()
		guard := bytes.Repeat([]byte{0xa5}, dstLen+zstdGuard)
		if err := cuda.MemcpyHtoD(dst.Ptr(), guard); err != nil {
			return err
		}
		frames := make([]Frame, len(cases))
		var so, do int
		host := make([]byte, 0, srcLen)
		for i, c := range cases {
			host = append(host, c.frame...)
			do += zstdGuard
			frames[i] = Frame{Src: src.Ptr() + cuda.DevicePtr(so), SrcLen: len(c.frame), Dst: dst.Ptr() + cuda.DevicePtr(do), DstCap: c.cap}
			so += len(c.frame)
			do += c.cap
		}
		if err := cuda.MemcpyHtoD(src.Ptr(), host); err != nil {
			return err
		}
		b, err := z.NewBatch(1 + rng.IntN(64))
		if err != nil {
			return err
		}
		defer b.Close()
		sizes := make([]int, 0, len(frames))
		for at := 0; at < len(frames); {
			k := min(len(frames)-at, 1+rng.IntN(b.Len()))
			got, err := b.Decode(0, frames[at:at+k])
			if err != nil {
				return err
			}
			sizes = append(sizes, got...)
			at += k
		}
		out := make([]byte, dstLen+zstdGuard)
		if err := cuda.MemcpyDtoH(out, dst.Ptr()); err != nil {
			return err
		}
		do = 0
		gpu := 0
		for i, c := range cases {
			if !bytes.Equal(out[do:do+zstdGuard], guard[:zstdGuard]) {
				t.Errorf("case %d: the guard before its destination changed", i)
			}
			do += zstdGuard
			got := out[do : do+c.cap]
			switch n := sizes[i]; {
			case c.want != nil && (n != len(c.want) || !bytes.Equal(got[:n], c.want)):
				t.Errorf("case %d: %d bytes decoded (want %d), equal %v", i, n, len(c.want), n == len(c.want) && bytes.Equal(got[:n], c.want))
			case c.want == nil && n >= 0:
				if m, ok := model[i]; ok && !bytes.Equal(got[:n], m) {
					t.Errorf("case %d: the GPU decoded %d bytes where the CPU's model decodes %d", i, n, len(m))
				}
			case c.want == nil && model[i] != nil:
				t.Errorf("case %d: the GPU refused a frame the CPU's model decodes", i)
			}
			if sizes[i] >= 0 {
				gpu++
			}
			do += c.cap
		}
		if !bytes.Equal(out[do:], guard[:zstdGuard]) {
			t.Errorf("the guard after the last destination changed")
		}
		t.Logf("%d frames, %d decoded on the GPU", len(cases), gpu)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// hostDecodes returns the CPU model's decodes of the cases that are not
// valid frames (by index), those it decodes.
func hostDecodes(t *testing.T, cases []zstdCase) map[int][]byte {
	return modelDecodes(t, hostDecoder(t), len(cases), func(i int) bool { return cases[i].want == nil },
		func(w *bytes.Buffer, i int) { writeJob(w, cases[i]) })
}

// modelDecodes runs the CPU model bin on the n cases that invalid picks,
// each written by write, and returns its decodes of them (by index),
// those it decodes.
func modelDecodes(t *testing.T, bin string, n int, invalid func(i int) bool, write func(w *bytes.Buffer, i int)) map[int][]byte {
	var in bytes.Buffer
	var idx []int
	for i := range n {
		if invalid(i) {
			write(&in, i)
			idx = append(idx, i)
		}
	}
	out := runHost(t, bin, &in, len(idx))
	m := map[int][]byte{}
	for k, i := range idx {
		if out[k] != nil {
			m[i] = out[k]
		}
	}
	return m
}

// BenchmarkZstd decodes 1 GiB of 1 MiB frames (zarrbench's smooth
// float32 field plus noise, zstd level 3 as Zarr writes it) on every
// core with the CPU's decoder (libzstd, else klauspost/compress) and on
// the GPU in launches of 1024, 256 and 64 frames, in the same run: GB/s
// of decoded bytes. KVIK_ZSTD_PTX (name=path.ptx,...) adds builds of
// zstd.cu (variants made with clang as go generate makes zstd.ptx), for
// work on the kernel.
func BenchmarkZstd(b *testing.B) {
	const frame, count = 1 << 20, 1024
	data := make([][]byte, count)
	frames := make([][]byte, count)
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(false))
	field := fielddata.Float32(16384, 16384, 1) // zarrbench's array: 2.5x at level 3
	for i := range data {
		data[i] = field[i*frame : (i+1)*frame]
		if libzstd.Load() == nil {
			frames[i], _ = libzstd.Compress(nil, data[i], 3, false)
		} else {
			frames[i] = enc.EncodeAll(data[i], nil)
		}
	}
	var stored int
	for _, f := range frames {
		stored += len(f)
	}
	b.Logf("%d frames of %d bytes, %.2fx compressed", count, frame, float64(count*frame)/float64(stored))
	out := make([][]byte, count)
	for i := range out {
		out[i] = make([]byte, frame)
	}
	native := libzstd.Load() == nil
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	benchCPU(b, count, frame, func(i int) (err error) {
		if native {
			_, err = libzstd.Decompress(out[i], frames[i])
		} else {
			_, err = dec.DecodeAll(frames[i], out[i][:0])
		}
		return err
	})
	benchBuilds(b, "zstd", "KVIK_ZSTD_PTX", func(ctx cuda.Context) (Decoder, *cuda.Function, error) {
		z, err := LoadZstd(ctx)
		if err != nil {
			return nil, nil, err
		}
		return z, &z.f, nil
	}, frames, data, frame)
}

// benchCPU runs decode(i) for every frame i of count (frame bytes each,
// decoded) on GOMAXPROCS goroutines, as the "cpu" sub-benchmark.
func benchCPU(b *testing.B, count, frame int, decode func(i int) error) {
	b.Run("cpu", func(b *testing.B) {
		b.SetBytes(int64(count * frame))
		for b.Loop() {
			var next atomic.Int64
			var g errgroup.Group
			for range runtime.GOMAXPROCS(0) {
				g.Go(func() error {
					for i := int(next.Add(1) - 1); i < count; i = int(next.Add(1) - 1) {
						if err := decode(i); err != nil {
							return err
						}
					}
					return nil
				})
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchBuilds runs benchDecoder with the decoder load returns, as
// NAME.ptx (the package's kernel), and again with each build env lists
// (name=path.ptx,...: builds of the kernel's source made as go generate
// makes them, for work on the kernel) put in place of the function load
// points to.
func benchBuilds(b *testing.B, name, env string, load func(cuda.Context) (Decoder, *cuda.Function, error), frames, data [][]byte, frame int) {
	builds := []string{name + ".ptx="}
	if v := os.Getenv(env); v != "" {
		builds = append(builds, strings.Split(v, ",")...)
	}
	for _, build := range builds {
		label, path, _ := strings.Cut(build, "=")
		b.Run(label, func(b *testing.B) {
			ctx := gputest.Primary(b, 0)
			err := cuda.WithContext(ctx, func() error {
				d, f, err := load(ctx)
				if err != nil {
					return err
				}
				if path != "" {
					v, unload, err := variant(path, name)
					if err != nil {
						return err
					}
					defer unload()
					*f = v
				}
				return benchDecoder(b, ctx, d, frames, data, frame)
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

// variant loads kernel name from the PTX at path (a build of a kernel's
// source made as go generate makes it, for work on the kernel); unload
// it when done.
func variant(path, name string) (cuda.Function, func(), error) {
	ptx, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, err
	}
	m, err := cuda.ModuleLoadData(ptx)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", path, err)
	}
	f, err := cuda.ModuleGetFunction(m, name)
	if err != nil {
		cuda.ModuleUnload(m)
		return 0, nil, err
	}
	return f, func() { cuda.ModuleUnload(m) }, nil
}

// benchDecoder runs launches of d over frames (1 MiB each: frame
// bytes) in batches of all, 256 and 64, and in batches of 64 on streams
// of their own all at once, then checks every frame's bytes.
func benchDecoder(b *testing.B, ctx cuda.Context, d Decoder, frames, data [][]byte, frame int) error {
	count, stored := len(frames), 0
	for _, f := range frames {
		stored += len(f)
	}
	src, err := cuda.MemAlloc(stored)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := cuda.MemAlloc(count * frame)
	if err != nil {
		return err
	}
	defer dst.Close()
	zf := make([]Frame, count)
	at := 0
	for i, f := range frames {
		if err := cuda.MemcpyHtoD(src.Ptr()+cuda.DevicePtr(at), f); err != nil {
			return err
		}
		zf[i] = Frame{Src: src.Ptr() + cuda.DevicePtr(at), SrcLen: len(f), Dst: dst.Ptr() + cuda.DevicePtr(i*frame), DstCap: frame}
		at += len(f)
	}
	for _, per := range []int{count, 256, 64} {
		batch, err := d.NewBatch(per)
		if err != nil {
			return err
		}
		// A sub-benchmark runs on a goroutine of its own: the context
		// made current there.
		b.Run(fmt.Sprintf("launch%d", per), func(b *testing.B) {
			b.SetBytes(int64(count * frame))
			err := cuda.WithContext(ctx, func() error {
				for b.Loop() {
					for at := 0; at < count; at += per {
						sizes, err := batch.Decode(0, zf[at:at+per])
						if err != nil {
							return err
						}
						for i, n := range sizes {
							if n != frame {
								return fmt.Errorf("frame %d: %d bytes", at+i, n)
							}
						}
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
		batch.Close()
	}
	// The frames in batches of 64, each on a stream and goroutine of its
	// own, all at once (as zarr's device reads decode batches): on an
	// H200 as fast as one launch of all (61 against 61 ms).
	b.Run(fmt.Sprintf("streams%d", count/64), func(b *testing.B) {
		b.SetBytes(int64(count * frame))
		if err := benchStreams(b, ctx, d, zf, 64, frame); err != nil {
			b.Fatal(err)
		}
	})
	got := make([]byte, frame)
	for i := range count {
		if err := cuda.MemcpyDtoH(got, dst.Ptr()+cuda.DevicePtr(i*frame)); err != nil {
			return err
		}
		if !bytes.Equal(got, data[i]) {
			return fmt.Errorf("frame %d decoded wrong", i)
		}
	}
	return nil
}

// benchStreams decodes zf with d in batches of per frames at once, each
// batch on a goroutine with a stream of its own, b.N times.
func benchStreams(b *testing.B, ctx cuda.Context, d Decoder, zf []Frame, per, frame int) error {
	k := (len(zf) + per - 1) / per
	batches, streams := make([]*Batch, k), make([]cuda.Stream, k)
	defer cuda.WithContext(ctx, func() error {
		for i := range k {
			if batches[i] != nil {
				batches[i].Close()
			}
			if streams[i] != 0 {
				cuda.StreamDestroy(streams[i])
			}
		}
		return nil
	})
	err := cuda.WithContext(ctx, func() (err error) {
		for i := range k {
			if batches[i], err = d.NewBatch(per); err != nil {
				return err
			}
			if streams[i], err = cuda.StreamCreate(cuda.StreamNonBlocking); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for b.Loop() {
		var g errgroup.Group
		for i := range k {
			g.Go(func() error {
				return cuda.WithContext(ctx, func() error {
					part := zf[i*per : min(len(zf), (i+1)*per)]
					sizes, err := batches[i].Decode(streams[i], part)
					for j, n := range sizes {
						if err == nil && n != frame {
							err = fmt.Errorf("frame %d: %d bytes", i*per+j, n)
						}
					}
					return err
				})
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
	return nil
}
