package kernels

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/libdeflate"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// TestInflate decodes on the GPU, in batches of random sizes, the
// streams of TestInflateModel in each format (klauspost/compress's and
// the standard library's, with corrupted ones, destinations too small
// and streams followed by more bytes): every valid stream to its data;
// every other one to -1 or, where the CPU model (testdata/inflate_host.c,
// where gcc is) decodes it, to the model's bytes; no byte written around
// any destination.
func TestInflate(t *testing.T) {
	ctx := gputest.Primary(t, 0)
	rng := rand.New(rand.NewPCG(5, 61))
	all := append(inflateCases(t, rng, 180), inflateMutations(t, rng, 600)...)
	for f := range Format(3) {
		t.Run(f.String(), func(t *testing.T) {
			var cases []inflateCase
			for _, c := range all {
				if c.format == f {
					cases = append(cases, c)
				}
			}
			model := map[int][]byte{}
			if gcc, err := exec.LookPath("gcc"); err == nil && gcc != "" {
				model = hostInflates(t, cases)
			}
			plain := make([]zstdCase, len(cases))
			for i, c := range cases {
				plain[i] = c.zstdCase
			}
			checkDecodes(t, ctx, func() (Decoder, error) { return LoadInflate(ctx, f) }, rng, plain, model)
		})
	}
}

// hostInflates returns the CPU model's decodes of the cases that are not
// valid streams (by index), those it decodes.
func hostInflates(t *testing.T, cases []inflateCase) map[int][]byte {
	return modelDecodes(t, hostInflate(t), len(cases), func(i int) bool { return cases[i].want == nil },
		func(w *bytes.Buffer, i int) { writeInflateJob(w, cases[i]) })
}

// writeInflateJob writes c as testdata/inflate_host.c reads a job.
func writeInflateJob(w *bytes.Buffer, c inflateCase) {
	binary.Write(w, binary.LittleEndian, [3]uint64{uint64(len(c.frame)), uint64(c.cap), uint64(c.format)})
	w.Write(c.frame)
}

// BenchmarkInflate decodes 1 GiB of 1 MiB gzip streams (zarrbench's
// smooth float32 field plus noise at level 5, as its gzip arrays are
// written) on every core with the CPU's decoder (libdeflate, else
// klauspost/compress) and on the GPU in launches of 1024, 256 and 64
// streams, in the same run: GB/s of decoded bytes. KVIK_INFLATE_PTX
// (name=path.ptx,...) adds builds of inflate.cu, as KVIK_ZSTD_PTX does
// for BenchmarkZstd.
func BenchmarkInflate(b *testing.B) {
	const frame, count = 1 << 20, 1024
	data := make([][]byte, count)
	streams := make([][]byte, count)
	field := fielddata.Float32(16384, 16384, 1)
	var stored int
	for i := range data {
		data[i] = field[i*frame : (i+1)*frame]
		streams[i] = deflateStream(b, Gzip, 5, false, data[i])
		stored += len(streams[i])
	}
	b.Logf("%d streams of %d bytes, %.2fx compressed", count, frame, float64(count*frame)/float64(stored))
	out := make([][]byte, count)
	for i := range out {
		out[i] = make([]byte, frame)
	}
	native := libdeflate.Load() == nil
	benchCPU(b, count, frame, func(i int) (err error) {
		if native {
			_, _, err = libdeflate.GzipDecompress(out[i], streams[i])
		} else {
			_, err = referenceInflate(inflateCase{zstdCase{frame: streams[i], cap: frame}, Gzip})
		}
		return err
	})
	benchBuilds(b, "inflate", "KVIK_INFLATE_PTX", func(ctx cuda.Context) (Decoder, *cuda.Function, error) {
		z, err := LoadInflate(ctx, Gzip)
		if err != nil {
			return nil, nil, err
		}
		return z, &z.f, nil
	}, streams, data, frame)
}
