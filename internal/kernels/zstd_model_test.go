package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/kvikgo/kvik/internal/libzstd"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
)

// zstdCase is a frame and what it decodes to (nil: a frame the decoder
// must refuse or find corrupt, without touching memory outside its
// buffers).
type zstdCase struct {
	frame, want []byte
	cap         int
}

// zstdData returns n bytes of one of several kinds: noise, a smooth
// float32 field plus noise (what Zarr arrays hold), text-like runs,
// zeros, a short pattern.
func zstdData(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	switch rng.IntN(5) {
	case 0:
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	case 1:
		for i := 0; i+4 <= n; i += 4 {
			v := float32(math.Sin(float64(i)/4000)) + float32(rng.NormFloat64()*0.01)
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
		}
	case 2:
		words := []string{"tensor ", "zarr ", "chunk ", "the ", "GPU ", "of ", "decode\n"}
		var w bytes.Buffer
		for w.Len() < n {
			w.WriteString(words[rng.IntN(len(words))])
		}
		copy(b, w.Bytes())
	case 3:
	case 4:
		p := make([]byte, 1+rng.IntN(40))
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		for i := range b {
			b[i] = p[i%len(p)]
		}
	}
	return b
}

// zstdCases encodes random data with klauspost/compress at each level
// and, where it loads, the system's libzstd at several, plus frames
// with a checksum (refused: the CPU checks those) and corrupted ones.
func zstdCases(t testing.TB, rng *rand.Rand, count int) []zstdCase {
	var cases []zstdCase
	levels := []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression, zstd.SpeedBestCompression}
	native := libzstd.Load() == nil
	for i := range count {
		n := rng.IntN(300 << 10)
		if i%4 == 0 {
			n = rng.IntN(300)
		}
		data := zstdData(rng, n)
		var frame []byte
		if native && i%2 == 1 {
			var err error
			if frame, err = libzstd.Compress(nil, data, []int{1, 3, 5, 9, 15, 19}[rng.IntN(6)], false); err != nil {
				t.Fatal(err)
			}
		} else {
			enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(levels[rng.IntN(len(levels))]), zstd.WithEncoderCRC(false),
				zstd.WithSingleSegment(rng.IntN(2) == 0), zstd.WithLowerEncoderMem(rng.IntN(2) == 0))
			if err != nil {
				t.Fatal(err)
			}
			frame = enc.EncodeAll(data, nil)
			enc.Close()
		}
		cases = append(cases, zstdCase{frame: frame, want: data, cap: n})
		if i%8 == 0 { // a destination too small
			cases = append(cases, zstdCase{frame: frame, cap: max(0, n-1-rng.IntN(100))})
		}
		if i%2 == 0 { // corrupted: a byte flipped, cut short, or cut and flipped
			c := append([]byte(nil), frame...)
			switch k := rng.IntN(3); {
			case len(c) > 4 && k == 0:
				c[4+rng.IntN(len(c)-4)] ^= byte(1 + rng.IntN(255))
			case k == 1:
				c = c[:rng.IntN(len(c)+1)]
			default:
				for range 1 + rng.IntN(8) {
					c[rng.IntN(len(c))] = byte(rng.Uint32())
				}
			}
			cases = append(cases, zstdCase{frame: c, cap: n})
		}
	}
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	data := zstdData(rng, 5000)
	cases = append(cases, zstdCase{frame: enc.EncodeAll(data, nil), cap: len(data)})
	enc.Close()
	return cases
}

// hostDecoder builds testdata/zstd_host.c (zstd.cu for the CPU); defs
// are more -D flags (a smaller GROUP: frames of a few blocks cross
// groups, as a frame of megabytes does).
func hostDecoder(t *testing.T, defs ...string) string {
	return hostBuild(t, "zstd_host", defs...)
}

// hostBuild builds testdata/NAME.c (a kernel's source for the CPU) with
// gcc and defs, under AddressSanitizer where gcc has it, or skips.
func hostBuild(t *testing.T, name string, defs ...string) string {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build the decoder for the CPU")
	}
	bin := filepath.Join(t.TempDir(), name)
	src := filepath.Join("testdata", name+".c")
	if out, err := exec.Command(gcc, append(defs, "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover", "-o", bin, src)...).CombinedOutput(); err != nil {
		t.Logf("without sanitizers: %s", out)
		if out, err := exec.Command(gcc, append(defs, "-O1", "-o", bin, src)...).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
	}
	return bin
}

// TestZstdModel runs zstd.cu's decoder on the CPU (testdata/zstd_host.c,
// under AddressSanitizer) over frames of random data that
// klauspost/compress and libzstd encoded, compared with the data; frames
// it must refuse (a checksum to check, a destination too small) and
// corrupted ones end in an error code or decode without a read or write
// outside their buffers.
func TestZstdModel(t *testing.T) {
	bin := hostDecoder(t)
	sizes, err := exec.Command(bin, "sizes").Output()
	if want := fmt.Sprintf("%d %d\n", frameJobSize, zstdScratchSize); err != nil || string(sizes) != want {
		t.Fatalf("C's struct sizes %q (%v), the Go side's %q", sizes, err, want)
	}
	rng := rand.New(rand.NewPCG(8, 27))
	cases := zstdCases(t, rng, 200)
	t.Run("group8", func(t *testing.T) { zstdModel(t, bin, cases) })
	t.Run("group2", func(t *testing.T) { zstdModel(t, hostDecoder(t, "-DGROUP=2"), cases) })
	t.Run("mutated", func(t *testing.T) { zstdModel(t, bin, zstdMutations(t, rng, 4000)) })
}

// zstdMutations returns n frames of zstdCases' valid ones (and of a
// megabyte of zarrbench's field: eight blocks and more), each with one
// to eight bytes changed, cut short or both: the decoder must refuse
// each, or decode it to the reference decoder's bytes.
func zstdMutations(t *testing.T, rng *rand.Rand, n int) []zstdCase {
	var valid []zstdCase
	for _, c := range zstdCases(t, rng, 40) {
		if c.want != nil && len(c.frame) > 8 {
			valid = append(valid, c)
		}
	}
	field := fielddata.Float32(512, 1024, 2)
	if f, err := libzstd.Compress(nil, field, 3, false); err == nil {
		valid = append(valid, zstdCase{frame: f, cap: len(field)})
	}
	cases := make([]zstdCase, n)
	for i := range cases {
		v := valid[rng.IntN(len(valid))]
		c := append([]byte(nil), v.frame...)
		if rng.IntN(4) == 0 {
			c = c[:5+rng.IntN(len(c)-5)]
		}
		for range 1 + rng.IntN(8) {
			c[rng.IntN(len(c))] ^= byte(1 + rng.IntN(255))
		}
		cases[i] = zstdCase{frame: c, cap: v.cap}
	}
	return cases
}

func zstdModel(t *testing.T, bin string, cases []zstdCase) {
	var in bytes.Buffer
	for _, c := range cases {
		writeJob(&in, c)
	}
	out := runHost(t, bin, &in, len(cases))
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	decoded, refused := 0, 0
	for i, c := range cases {
		got := out[i]
		if got != nil && c.want == nil {
			// A frame the model decodes, corrupted or not, decodes to the
			// same bytes in the reference decoder (libzstd; where it does
			// not load, klauspost/compress, which refuses a few frames
			// libzstd takes): the GPU never accepts what the CPU would
			// call corrupt.
			ref, err := dec.DecodeAll(c.frame, nil)
			if libzstd.Load() == nil {
				ref, err = libzstd.Decompress(make([]byte, c.cap), c.frame)
			}
			if err != nil || !bytes.Equal(ref, got) {
				t.Errorf("case %d: the model decodes %d bytes; the reference decoder: %d bytes, %v", i, len(got), len(ref), err)
			}
		}
		if got == nil {
			refused++
			if c.want != nil {
				t.Errorf("case %d (%d bytes from %d): refused", i, len(c.want), len(c.frame))
			}
			continue
		}
		decoded++
		if c.want != nil && !bytes.Equal(got, c.want) {
			t.Errorf("case %d: %d bytes decoded, want %d, differing", i, len(got), len(c.want))
		}
	}
	t.Logf("%d frames: %d decoded, %d refused", len(cases), decoded, refused)
}

// writeJob writes c as testdata/zstd_host.c reads a job.
func writeJob(w *bytes.Buffer, c zstdCase) {
	binary.Write(w, binary.LittleEndian, [2]uint64{uint64(len(c.frame)), uint64(c.cap)})
	w.Write(c.frame)
}

// runHost runs the CPU decoder bin on the n jobs of in and returns each
// one's bytes, nil where it ended in an error code.
func runHost(t *testing.T, bin string, in *bytes.Buffer, n int) [][]byte {
	cmd := exec.Command(bin)
	cmd.Stdin = in
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the decoder failed: %v", err)
	}
	r := bytes.NewReader(out)
	res := make([][]byte, n)
	for i := range res {
		var v uint64
		if err := binary.Read(r, binary.LittleEndian, &v); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		if v > math.MaxInt32 {
			continue
		}
		res[i] = make([]byte, v)
		if _, err := io.ReadFull(r, res[i]); err != nil {
			t.Fatal(err)
		}
	}
	return res
}
