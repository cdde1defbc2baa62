package npy

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/kernels"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// fromDevice copies a's bytes from its device to the host.
func fromDevice(t testing.TB, a *Array) []byte {
	t.Helper()
	return gputest.FromDevice(t, a.Device, a.Ptr, a.Size())
}

// TestDeviceNumpyFiles loads numpy's files to device 0 and compares the
// device bytes with what numpy loaded, then saves each back from device
// memory and checks the file loads to the same header and bytes.
func TestDeviceNumpyFiles(t *testing.T) {
	gputest.Need(t)
	dir := refDir()
	e := readExpected(t, dir)
	tmp := t.TempDir()
	for name, want := range e.Files {
		a, err := Load(context.Background(), filepath.Join(dir, name), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := fromDevice(t, a)
		if sum(got) != want.Sha256 || !slices.Equal(a.Shape, want.Shape) {
			t.Fatalf("%s: device bytes or shape differ", name)
		}
		q := filepath.Join(tmp, name)
		// An empty array has no device memory (Ptr 0) and no Data: Save
		// takes it either way.
		if err := Save(context.Background(), q, SaveArray{Dtype: a.Dtype, Shape: a.Shape, Fortran: a.FortranOrder, Ptr: a.Ptr}); err != nil {
			t.Fatal(err)
		}
		b, err := LoadHost(context.Background(), q, nil)
		if err != nil || !bytes.Equal(b.Data, got) || b.Dtype != a.Dtype || b.FortranOrder != a.FortranOrder {
			t.Fatalf("%s: saved from device and reloaded: %v", name, err)
		}
		a.Close()
	}
}

// TestWriteForNumpy writes arrays from device memory for
// bench/loaders_xcheck.py check (KVIK_NPY_XCHECK_OUT).
func TestWriteForNumpy(t *testing.T) {
	out := os.Getenv("KVIK_NPY_XCHECK_OUT")
	if out == "" {
		t.Skip("KVIK_NPY_XCHECK_OUT not set")
	}
	gputest.Need(t)
	rng := rand.New(rand.NewPCG(51, 52))
	e := expected{Generator: "kvik npy.SaveDevice", Files: map[string]expectedFile{}}
	tmp := t.TempDir()
	for i, ds := range allDtypes {
		d, _ := ParseDtype(ds)
		for j, shape := range [][]int64{{}, {0}, {7}, {3, 5}, {2, 3, 4}} {
			fortran := len(shape) >= 2 && j%2 == 1
			data := randData(rng, d, shape)
			src := filepath.Join(tmp, "src.npy")
			if err := Save(context.Background(), src, SaveArray{Dtype: d, Shape: shape, Fortran: fortran, Data: data}); err != nil {
				t.Fatal(err)
			}
			a, err := Load(context.Background(), src, nil)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("k%02d%d.npy", i, j)
			err = Save(context.Background(), filepath.Join(out, name), SaveArray{Dtype: d, Shape: shape, Fortran: fortran, Ptr: a.Ptr})
			a.Close()
			if err != nil {
				t.Fatal(err)
			}
			e.Files[name] = expectedFile{Descr: d.String(), FortranOrder: fortran, Shape: shape, Sha256: sum(data)}
		}
	}
	b, _ := json.MarshalIndent(e, "", " ")
	if err := os.WriteFile(filepath.Join(out, "expected.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDeviceNpzFiles loads NumPy's archives (stored and deflated members)
// to device 0, compares every array's device bytes with what NumPy
// loaded, then saves them back from device memory with SaveNpz and
// checks the archive loads to the same arrays.
func TestDeviceNpzFiles(t *testing.T) {
	gputest.Need(t)
	dir := filepath.Join("testdata", "npz")
	e := readNpzExpected(t, dir)
	tmp := t.TempDir()
	for name, want := range e.Archives {
		a, err := LoadNpz(context.Background(), filepath.Join(dir, name), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkArchive(t, name, a, want, func(arr *Array) []byte { return fromDevice(t, arr) })
		var arrays []NpzArray
		for _, k := range a.Names {
			arr := a.Arrays[k]
			arrays = append(arrays, NpzArray{k, SaveArray{Dtype: arr.Dtype, Shape: arr.Shape, Fortran: arr.FortranOrder, Ptr: arr.Ptr}})
		}
		q := filepath.Join(tmp, name)
		if err := SaveNpz(context.Background(), q, arrays); err != nil {
			t.Fatal(err)
		}
		b, err := LoadNpzHost(context.Background(), q, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkArchive(t, name+" saved from the device", b, want, func(arr *Array) []byte { return arr.Data })
		a.Close()
	}
}

// TestDeviceLargeNpz loads a .npz past 4 GiB (ZIP64's records) that
// NumPy wrote into $KVIK_TEST_NPZ_LARGE_DIR (bench/loaders_xcheck.py
// make-npz-large) onto the GPU and compares its arrays with what NumPy
// saved, then saves them back from device memory as kvik.npz there, with
// kvik-expected/expected.json for loaders_xcheck.py check-npz (NumPy's
// load of kvik's archive).
func TestDeviceLargeNpz(t *testing.T) {
	dir := os.Getenv("KVIK_TEST_NPZ_LARGE_DIR")
	if dir == "" {
		t.Skip("KVIK_TEST_NPZ_LARGE_DIR not set")
	}
	gputest.Need(t)
	e := readNpzExpected(t, dir)
	want := e.Archives["large.npz"]
	a, err := LoadNpz(context.Background(), filepath.Join(dir, "large.npz"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	checkArchive(t, "large.npz", a, want, func(arr *Array) []byte { return fromDevice(t, arr) })
	var arrays []NpzArray
	for _, k := range a.Names {
		arr := a.Arrays[k]
		arrays = append(arrays, NpzArray{k, SaveArray{Dtype: arr.Dtype, Shape: arr.Shape, Ptr: arr.Ptr}})
	}
	out := filepath.Join(dir, "kvik-expected")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := SaveNpz(context.Background(), filepath.Join(out, "large.npz"), arrays); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(e)
	if err := os.WriteFile(filepath.Join(out, "expected.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(out, "large.npz"))
	t.Logf("loaded %d arrays of %s; saved %d bytes", len(a.Names), filepath.Join(dir, "large.npz"), fi.Size())
}

// onDevice copies data to new device memory of ctx, off bytes into it
// (an unaligned address), freed when t ends, and returns its address.
func onDevice(t testing.TB, ctx cuda.Context, data []byte, off int) cuda.DevicePtr {
	t.Helper()
	var d *cuda.DeviceBuffer
	err := cuda.WithContext(ctx, func() (err error) {
		if d, err = cuda.MemAlloc(len(data) + off); err == nil {
			err = cuda.MemcpyHtoD(d.Ptr()+cuda.DevicePtr(off), data)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d.Ptr() + cuda.DevicePtr(off)
}

// TestDeviceNpzCRC checks stored members' CRC-32s on the GPU, with kvik's
// kernel and without it (through host memory): arrays of random sizes up
// to 40 MiB saved from device memory at unaligned addresses make the
// same archive, byte for byte, as from host memory, and load back onto
// the device; a byte flipped in an array, or a space of a header's
// padding made a tab (still a header that parses), is ErrInvalidArchive.
func TestDeviceNpzCRC(t *testing.T) {
	ctx := gputest.Primary(t, 0)
	u1, _ := ParseDtype("|u1")
	for _, kernel := range []bool{true, false} {
		t.Run(fmt.Sprint("kernel=", kernel), func(t *testing.T) {
			if !kernel {
				old := loadCRC32
				loadCRC32 = func(cuda.Context) (*kernels.CRC32, error) { return nil, errors.New("no kernel here") }
				t.Cleanup(func() { loadCRC32 = old })
			}
			rng := rand.New(rand.NewPCG(41, uint64(len(t.Name()))))
			sizes := []int{0, 1, 13, 4100, 1<<20 + 3, rng.IntN(40 << 20), 33<<20 + rng.IntN(1000)}
			var host, dev []NpzArray
			for i, n := range sizes {
				data := make([]byte, n)
				for j := range data {
					data[j] = byte(rng.Uint32())
				}
				name := fmt.Sprintf("a%d", i)
				host = append(host, NpzArray{name, SaveArray{Dtype: u1, Shape: []int64{int64(n)}, Data: data}})
				dev = append(dev, NpzArray{name, SaveArray{Dtype: u1, Shape: []int64{int64(n)}, Ptr: onDevice(t, ctx, data, 1+i%7)}})
			}
			dir := t.TempDir()
			hp, dp := filepath.Join(dir, "host.npz"), filepath.Join(dir, "dev.npz")
			if err := SaveNpz(context.Background(), hp, host); err != nil {
				t.Fatal(err)
			}
			if err := SaveNpz(context.Background(), dp, dev); err != nil {
				t.Fatal(err)
			}
			hb, _ := os.ReadFile(hp)
			db, _ := os.ReadFile(dp)
			if !bytes.Equal(hb, db) {
				t.Fatalf("saved from device memory: %d bytes unlike the %d saved from host memory", len(db), len(hb))
			}
			a, err := LoadNpz(context.Background(), dp, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range host {
				if got := fromDevice(t, a.Arrays[h.Name]); !bytes.Equal(got, h.Data) {
					t.Errorf("%s: %d bytes loaded unlike the %d saved", h.Name, len(got), len(h.Data))
				}
			}
			a.Close()
			hdr, err := ReadNpzHeader(context.Background(), dp, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, n := range sizes {
				at := int(hdr.Headers[fmt.Sprintf("a%d", i)].DataOffset)
				bad := map[string][]byte{"padding": bytes.Clone(db)}
				if bad["padding"][at-2] != ' ' || bad["padding"][at-1] != '\n' {
					t.Fatalf("a%d: the header does not end in a space and a newline", i)
				}
				bad["padding"][at-2] = '\t'
				if n > 0 {
					bad["array"] = bytes.Clone(db)
					bad["array"][at+rng.IntN(n)] ^= 1 << rng.IntN(8)
				}
				for what, b := range bad {
					a, err := LoadNpz(context.Background(), writeTemp(t, b), nil)
					if !errors.Is(err, ErrInvalidArchive) {
						t.Errorf("a%d (%d bytes), %s changed: %v, want ErrInvalidArchive", i, n, what, err)
					}
					if a != nil {
						a.Close()
					}
				}
			}
		})
	}
}

// BenchmarkSaveNpz saves four float32 arrays, 1 GiB in all, as a .npz in
// the temporary directory (TMPDIR=/dev/shm for the page cache) from
// device memory, and from host memory beside it: bytes a second of each.
// A device save sums its arrays on the GPU and writes them through the
// bounce buffers; a host save sums them on every core.
func BenchmarkSaveNpz(b *testing.B) {
	ctx := gputest.Primary(b, 0)
	const n = 1 << 28 // bytes an array
	f4, _ := ParseDtype("<f4")
	data := make([]byte, n)
	for i := 0; i < n; i += 4 {
		binary.LittleEndian.PutUint32(data[i:], math.Float32bits(float32(i%9973)*0.37))
	}
	var host, dev []NpzArray
	for i := range 4 {
		name := fmt.Sprint("w", i)
		host = append(host, NpzArray{name, SaveArray{Dtype: f4, Shape: []int64{n / 4}, Data: data}})
		dev = append(dev, NpzArray{name, SaveArray{Dtype: f4, Shape: []int64{n / 4}, Ptr: onDevice(b, ctx, data, 0)}})
	}
	path := filepath.Join(b.TempDir(), "w.npz")
	for _, c := range []struct {
		name   string
		arrays []NpzArray
	}{{"device", dev}, {"host", host}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				if err := SaveNpz(context.Background(), path, c.arrays); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDeviceS3Npz saves arrays from device memory (unaligned addresses,
// random sizes to 20 MiB) as a .npz object in versitygw, which must hold
// the bytes SaveNpz writes to a file from host memory, loads it back onto
// the device (ranged GETs, CRC-32s checked there), and finds a byte
// flipped in the object's array.
func TestDeviceS3Npz(t *testing.T) {
	ctx := gputest.Primary(t, 0)
	v := s3test.Start(t)
	rng := rand.New(rand.NewPCG(43, 44))
	u1, _ := ParseDtype("|u1")
	var host, dev []NpzArray
	for i := range 4 {
		n := 1 + rng.IntN(20<<20)
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		name := fmt.Sprint("s", i)
		host = append(host, NpzArray{name, SaveArray{Dtype: u1, Shape: []int64{int64(n)}, Data: data}})
		dev = append(dev, NpzArray{name, SaveArray{Dtype: u1, Shape: []int64{int64(n)}, Ptr: onDevice(t, ctx, data, i+1)}})
	}
	local := filepath.Join(t.TempDir(), "h.npz")
	if err := SaveNpz(context.Background(), local, host); err != nil {
		t.Fatal(err)
	}
	if err := SaveNpz(context.Background(), v.URLOf("dev.npz"), dev, v.Opts()...); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(local)
	got, ok := v.Object("dev.npz")
	if !ok || !bytes.Equal(got, want) {
		t.Fatalf("the object of %d bytes differs from the %d-byte file saved from host memory", len(got), len(want))
	}
	a, err := LoadNpz(context.Background(), v.URLOf("dev.npz"), nil, v.Opts()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range host {
		if b := fromDevice(t, a.Arrays[h.Name]); !bytes.Equal(b, h.Data) {
			t.Errorf("%s: loaded from S3 unlike saved", h.Name)
		}
	}
	a.Close()
	hdr, err := ReadNpzHeader(context.Background(), local, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(want)
	bad[hdr.Headers["s2"].DataOffset+int64(rng.IntN(len(host[2].Data)))] ^= 0x10
	v.Put(t, "bad.npz", bad)
	if a, err := LoadNpz(context.Background(), v.URLOf("bad.npz"), nil, v.Opts()...); !errors.Is(err, ErrInvalidArchive) {
		t.Errorf("a flipped byte: %v, want ErrInvalidArchive", err)
		if a != nil {
			a.Close()
		}
	}
}
