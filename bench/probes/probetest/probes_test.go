// Package probetest tests the C programs of bench/probes, which run on
// the GPU machine (see each file's header): it builds them against a
// stand-in for the CUDA driver (testdata/fakecuda) and checks where
// their bytes go.
package probetest

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// build compiles the stand-in driver and pread_steady.c into dir and
// returns the probe's path; it skips without gcc.
func build(t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	for _, args := range [][]string{
		{"-O2", "-shared", "-fPIC", "testdata/fakecuda/fakecuda.c", "-o", filepath.Join(dir, "libcuda.so")},
		{"-O2", "-Wall", "-pthread", "../pread_steady.c", "-Itestdata/fakecuda", "-L" + dir, "-lcuda", "-o", filepath.Join(dir, "pread_steady")},
	} {
		if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %v: %v\n%s", args, err, out)
		}
	}
	return filepath.Join(dir, "pread_steady")
}

// split is the probe's split of [lo, hi) in k pieces: the even split,
// each cut moved down to a multiple of task from lo.
func split(lo, hi int64, k int, task int64) []int64 {
	b := make([]int64, k+1)
	for i := range k {
		b[i] = lo + (hi-lo)*int64(i)/int64(k)/task*task
	}
	b[k] = hi
	return b
}

// frees returns the stand-in driver's "free" lines: each allocation's
// size and CRC, in the order freed.
func frees(out []byte) []string {
	var fs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "fake: free "); ok {
			fs = append(fs, s)
		}
	}
	return fs
}

// TestPreadSteadyShares runs pread_steady on 1 to 8 GPUs, through pinned
// buffers and from a registered mapping, on the whole file and on parts
// of it (PS_PART), with a chunk that is not a whole number of pages: it
// must finish, and each GPU's allocation must hold exactly its share of
// the file, the probe's even split (before, the shares assumed 1, 2 or 4
// GPUs: at 3 the last share overran its allocation and the probe died
// with CUDA_ERROR_INVALID_VALUE).
func TestPreadSteadyShares(t *testing.T) {
	dir := t.TempDir()
	probe := build(t, dir)
	rng := rand.New(rand.NewPCG(41, 3))
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	file := filepath.Join(dir, "f.bin")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	const task = 60 << 10 // PS_TASK_KIB=60
	n := int64(len(data))
	for _, part := range []struct{ k, of int }{{0, 1}, {0, 3}, {2, 3}} {
		for g := 1; g <= 8; g++ {
			for _, mode := range []string{"pread", "mmap"} {
				cmd := exec.Command(probe, file)
				cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir, "FAKE_GPUS=8", "PS_TASK_KIB=60",
					fmt.Sprintf("PS_GPUS=%d", g), fmt.Sprintf("PS_THREADS=%d", g+3), "PS_FDS=own", "PS_MODES="+mode,
					fmt.Sprintf("PS_PART=%d/%d", part.k, part.of))
				out, err := cmd.CombinedOutput()
				what := fmt.Sprintf("%d GPUs, %s, part %d/%d", g, mode, part.k, part.of)
				if err != nil {
					t.Fatalf("%s: %v\n%s", what, err, out)
				}
				p := split(0, n, part.of, task)
				b := split(p[part.k], p[part.k+1], g, task)
				var want []string
				for d := range g {
					share := data[b[d]:b[d+1]]
					if len(share) == 0 {
						share = []byte{0} // an empty share gets one byte
					}
					want = append(want, fmt.Sprintf("%d bytes crc %08x", len(share), crc32.ChecksumIEEE(share)))
				}
				if got := frees(out); strings.Join(got, "; ") != strings.Join(want, "; ") {
					t.Fatalf("%s: the GPUs' allocations hold\n%q\nwant\n%q\n%s", what, got, want, out)
				}
			}
		}
	}
}

// TestPreadSteadyBadPart checks that a part outside its count is refused.
func TestPreadSteadyBadPart(t *testing.T) {
	dir := t.TempDir()
	probe := build(t, dir)
	file := filepath.Join(dir, "f.bin")
	os.WriteFile(file, []byte("0123456789"), 0o644)
	for _, part := range []string{"3/3", "0/9", "x"} {
		cmd := exec.Command(probe, file)
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir, "PS_PART="+part)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "PS_PART") {
			t.Errorf("PS_PART=%s: %v\n%s", part, err, out)
		}
	}
}
