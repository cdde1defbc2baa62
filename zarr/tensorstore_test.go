package zarr

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// tensorStorePython returns a Python interpreter that imports tensorstore
// and numpy: $KVIK_TEST_TENSORSTORE, else python3. Without one the test
// skips with the reason (CI has no TensorStore; the GPU machines do).
func tensorStorePython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("KVIK_TEST_TENSORSTORE")
	if py == "skip" {
		t.Skip("KVIK_TEST_TENSORSTORE=skip")
	}
	if py == "" {
		py = "python3"
	}
	out, err := exec.Command(py, "-c", "import tensorstore, numpy; print(getattr(tensorstore, \"__version__\", \"(no version)\"))").CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Skipf("TensorStore interop needs %s importing tensorstore and numpy (set KVIK_TEST_TENSORSTORE to another interpreter): %v: %s", py, err, lines[len(lines)-1])
	}
	t.Logf("%s: tensorstore %s", py, strings.TrimSpace(string(out)))
	return py
}

// TestTensorStoreInterop writes v3 arrays with kvik in every codec chain
// both implement (uncompressed, zstd, Blosc LZ4 and zstd with byte and
// bit shuffle, gzip, sharded with zstd and crc32c; float32, and
// complex64 and complex128 stored big-endian), partial edge chunks and a
// missing chunk included, some through a store WithProcessLocks
// (its lock file beside the metadata), and checks that TensorStore reads
// them byte for byte (where a GPU is, Blosc LZ4 arrays written from
// device memory, plain and sharded, their chunks encoded by the GPU,
// too); TensorStore then
// writes arrays of the same metadata and
// values, which kvik must read byte for byte, whole and in a region.
func TestTensorStoreInterop(t *testing.T) {
	py := tensorStorePython(t)
	dir := t.TempDir()
	bytesLE := Codec{Name: "bytes", Configuration: map[string]any{"endian": "little"}}
	blosc := func(cname, shuffle string) Codec {
		return Codec{Name: "blosc", Configuration: map[string]any{"cname": cname, "clevel": 5, "shuffle": shuffle, "typesize": 4, "blocksize": 0}}
	}
	zstd := Codec{Name: "zstd", Configuration: map[string]any{"level": 3, "checksum": true}}
	bytesBE := Codec{Name: "bytes", Configuration: map[string]any{"endian": "big"}}
	f32, c64, c128 := DataType{Kind: Float, Size: 4}, DataType{Kind: Complex, Size: 8}, DataType{Kind: Complex, Size: 16}
	type tsCase struct {
		codecs []Codec
		dt     DataType
	}
	cases := map[string]tsCase{
		"raw":                {[]Codec{bytesLE}, f32},
		"zstd":               {[]Codec{bytesLE, zstd}, f32},
		"blosc-lz4":          {[]Codec{bytesLE, blosc("lz4", "shuffle")}, f32},
		"blosc-zstd":         {[]Codec{bytesLE, blosc("zstd", "shuffle")}, f32},
		"blosc-bitshuffle":   {[]Codec{bytesLE, blosc("lz4", "bitshuffle")}, f32},
		"gzip":               {[]Codec{bytesLE, {Name: "gzip", Configuration: map[string]any{"level": 5}}}, f32},
		"sharded-zstd":       {shardCodecs([]int{16, 24}, false, []Codec{bytesLE, zstd}), f32},
		"complex64-zstd":     {[]Codec{bytesBE, zstd}, c64},
		"complex128-sharded": {shardCodecs([]int{16, 24}, false, []Codec{bytesBE, zstd}), c128},
	}
	// Where a GPU is, one Blosc LZ4 array is written from device memory,
	// its whole chunks encoded by the GPU (kernels.BloscLZ4).
	var gpu cuda.Context
	if gputest.Count() > 0 {
		gpu = gputest.Primary(t, 0)
		cases["blosc-lz4-gpu"] = cases["blosc-lz4"]
		cases["sharded-lz4-gpu"] = tsCase{shardCodecs([]int{16, 24}, false, []Codec{bytesLE, blosc("lz4", "shuffle")}), f32}
	} else {
		t.Log("no GPU: no array written from device memory")
	}
	shape := []int{100, 90}
	datas := map[DataType][]byte{
		f32:  fielddata.Float32(shape[0], shape[1], 7),
		c64:  fielddata.Float32(shape[0], 2*shape[1], 8), // real, imaginary, ...
		c128: widen(fielddata.Float32(shape[0], 2*shape[1], 9)),
	}
	for dt, data := range datas {
		// The last chunk row holds the fill value: a missing chunk (an
		// inner chunk missing from its shard).
		clear(data[dt.Size*90*96:])
	}
	type entry struct {
		Kvik string `json:"kvik"`
		TS   string `json:"ts"`
		Data string `json:"data"`
	}
	var manifest []entry
	for name, c := range cases {
		codecs, data := c.codecs, datas[c.dt]
		chunks := []int{32, 48}
		if strings.HasPrefix(name, "sharded") {
			chunks = []int{64, 48} // shards of 4 x 2 inner chunks of 16 x 24
		}
		// Some written with process locks: TensorStore must read past
		// their lock file.
		var opts []StoreOption
		locked := name == "zstd" || name == "blosc-lz4" || name == "sharded-zstd"
		if locked {
			opts = append(opts, WithProcessLocks())
		}
		s, err := NewDirStore(filepath.Join(dir, "kvik-"+name), opts...)
		if err != nil {
			t.Fatal(err)
		}
		a, err := Create(bg, s, "", Metadata{Shape: shape, ChunkShape: chunks, DataType: c.dt, Codecs: codecs})
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, "-gpu") {
			zarrtune.GPUEncodeBytes.Store(1) // a chunk a batch, none of gpuEncodeMin
			before := gpuEncodedChunks.Load()
			err := writeFromDevice(gpu, a, []int{0, 0}, shape, data)
			zarrtune.GPUEncodeBytes.Store(0)
			if err != nil {
				t.Fatal(err)
			}
			if gpuEncodedChunks.Load() == before {
				t.Fatalf("%s: the GPU encoded no chunk", name)
			}
		} else if err := a.WriteRegion(bg, []int{0, 0}, shape, data); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(s.Root(), lockName)); locked && err != nil {
			t.Fatalf("%s: written with process locks, no lock file: %v", name, err)
		}
		manifest = append(manifest, entry{s.Root(), filepath.Join(dir, "ts-"+name), filepath.Join(dir, name+".bin")})
		if err := os.WriteFile(manifest[len(manifest)-1].Data, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, _ := json.Marshal(manifest)
	mf := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(mf, m, 0o644); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "tensorstore_interop.py"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, script, mf).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("tensorstore_interop.py: %v", err)
	}
	rng := rand.New(rand.NewPCG(31, 32))
	for _, e := range manifest {
		s, err := NewDirStore(e.TS)
		if err != nil {
			t.Fatal(err)
		}
		a, err := Open(bg, s, "")
		if err != nil {
			t.Fatalf("%s: %v", e.TS, err)
		}
		data := datas[a.DataType()]
		got := make([]byte, len(data))
		if err := a.ReadRegion(bg, []int{0, 0}, shape, got); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: kvik reads other values than TensorStore wrote (%v)", e.TS, err)
		}
		start, stop := randRegion(rng, shape)
		want := model{shape: shape, es: a.DataType().Size, buf: data}.region(start, stop)
		part := make([]byte, len(want))
		if err := a.ReadRegion(bg, start, stop, part); err != nil || !bytes.Equal(part, want) {
			t.Fatalf("%s: region %v-%v differs (%v)", e.TS, start, stop, err)
		}
	}
}

// widen converts little-endian float32s to float64s.
func widen(f32 []byte) []byte {
	out := make([]byte, 2*len(f32))
	for i := 0; i < len(f32); i += 4 {
		f := math.Float32frombits(binary.LittleEndian.Uint32(f32[i:]))
		binary.LittleEndian.PutUint64(out[2*i:], math.Float64bits(float64(f)))
	}
	return out
}
