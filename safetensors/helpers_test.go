package safetensors

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// randomTensors makes n tensors of random dtypes and shapes (scalars and
// empty ones included) with random bytes.
func randomTensors(rng *rand.Rand, n int) []SaveTensor {
	dts := []Dtype{BOOL, U8, I8, F8E5M2, F8E4M3, F8E8M0, I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64, F4}
	var ts []SaveTensor
	for i := range n {
		d := dts[rng.IntN(len(dts))]
		var shape []int64
		switch rng.IntN(6) {
		case 0: // scalar
		case 1:
			shape = []int64{int64(rng.IntN(3)), 0}
		default:
			for range rng.IntN(3) + 1 {
				shape = append(shape, int64(rng.IntN(40)+1))
			}
		}
		if d == F4 { // whole bytes: an even count
			shape = append(shape, 2)
		}
		t := SaveTensor{Name: "t" + string(rune('a'+i%26)) + "." + string(rune('0'+i/26)), Dtype: d, Shape: shape}
		size, err := t.bytes()
		if err != nil {
			panic(err)
		}
		t.Data = make([]byte, size)
		for j := range t.Data {
			t.Data[j] = byte(rng.Uint32())
		}
		ts = append(ts, t)
	}
	return ts
}

type expectedTensor struct {
	Dtype  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	Sha256 string  `json:"sha256"`
}

type expectedFile struct {
	Metadata map[string]string         `json:"metadata"`
	Tensors  map[string]expectedTensor `json:"tensors"`
}

type expected struct {
	Generator string                  `json:"generator"`
	Files     map[string]expectedFile `json:"files"`
}

// refDirs are the folders of reference files and their expected.json:
// KVIK_ST_REF_DIR alone on the GPU machine, else the committed testdata
// (the safetensors project's samples, and files written by
// safetensors.torch.save_file on the GPU machine).
func refDirs() []string {
	if d := os.Getenv("KVIK_ST_REF_DIR"); d != "" {
		return []string{d}
	}
	return []string{filepath.Join("testdata", "samples"), filepath.Join("testdata", "torch")}
}

func readExpected(t *testing.T, dir string) expected {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e expected
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	if len(e.Files) == 0 {
		t.Fatal("expected.json lists no files")
	}
	return e
}
