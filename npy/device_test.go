package npy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/gputest"
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
