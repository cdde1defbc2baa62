package npy

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/pyfind"
)

// numpyPython returns a python3 with NumPy, or skips (fails under
// CI=true, whose script installs it, unless KVIK_TEST_NUMPY_PYTHON=skip).
func numpyPython(t *testing.T) string {
	t.Helper()
	return pyfind.Find(t, "import numpy; print(numpy.__version__)", "numpy", nil, "KVIK_TEST_NUMPY_PYTHON",
		"needs python3 with NumPy (apt-get install python3-numpy)")
}

// TestNumpyLoadsSaved saves random arrays of every dtype (structured ones
// among them) and shape, C and Fortran order, from host memory, and has
// NumPy load each (bench/loaders_xcheck.py check): its dtype, shape,
// order and bytes must be those saved. TestNumpyFiles is the other way.
func TestNumpyLoadsSaved(t *testing.T) {
	py := numpyPython(t)
	rng := rand.New(rand.NewPCG(61, 62))
	dir := t.TempDir()
	e := expected{Generator: "kvik npy.Save", Files: map[string]expectedFile{}}
	for i, ds := range allDtypes {
		d, err := ParseDtype(ds)
		if err != nil {
			t.Fatal(err)
		}
		for j, shape := range [][]int64{{}, {0}, {int64(1 + rng.IntN(9))}, {3, int64(1 + rng.IntN(5))}, {2, 3, int64(1 + rng.IntN(4))}} {
			fortran := len(shape) >= 2 && (i+j)%2 == 1
			data := randData(rng, d, shape)
			name := fmt.Sprintf("s%02d%d.npy", i, j)
			if err := Save(context.Background(), filepath.Join(dir, name), SaveArray{Dtype: d, Shape: shape, Fortran: fortran, Data: data}); err != nil {
				t.Fatal(err)
			}
			e.Files[name] = expectedFile{Descr: d.String(), FortranOrder: fortran, Shape: shape, Sha256: sum(data)}
		}
	}
	b, _ := json.MarshalIndent(e, "", " ")
	if err := os.WriteFile(filepath.Join(dir, "expected.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "../bench/loaders_xcheck.py", "check", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf(": %d passed, 0 failed", len(e.Files))) {
		t.Fatalf("NumPy's loads of the saved files: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}
