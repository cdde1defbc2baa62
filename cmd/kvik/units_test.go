package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"0": 0, "4096": 4096, "1b": 1, "1B": 1,
		"4k": 4 << 10, "4K": 4 << 10, "4KiB": 4 << 10, "4kib": 4 << 10, "4KB": 4000,
		"256MiB": 256 << 20, "256M": 256 << 20, "256m": 256 << 20, "2MB": 2e6,
		"1GiB": 1 << 30, "1G": 1 << 30, "1.5G": 3 << 29, "1GB": 1e9, " 2 GiB ": 2 << 30,
		"1T": 1 << 40, "1TiB": 1 << 40, "1TB": 1e12, "0.5k": 512,
	}
	for in, want := range good {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "k", "MiB", "-1", "-1M", "1X", "1 PiB", "1..5M", "abc", "1e3", "9999999999T", "NaN", "1MiBs"} {
		if n, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, n)
		}
	}
}

func TestFormatSize(t *testing.T) {
	cases := map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 256 << 20: "256 MiB", 3 << 29: "1.5 GiB", 100000007: "95.37 MiB", 1 << 40: "1 TiB"}
	for in, want := range cases {
		if got := formatSize(in); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestParseIntList(t *testing.T) {
	got, err := parseIntList("1, 4,16,4")
	if err != nil || !reflect.DeepEqual(got, []int{1, 4, 16}) {
		t.Errorf("parseIntList = %v, %v", got, err)
	}
	for _, in := range []string{"", "0", "1,,2", "-1", "x", "1;2"} {
		if _, err := parseIntList(in); err == nil {
			t.Errorf("parseIntList(%q): want an error", in)
		}
	}
}

func TestParseFlagsInterspersed(t *testing.T) {
	e := &env{stdout: io.Discard, stderr: io.Discard}
	fs := newFlagSet(e, "x", "", "")
	v := fs.Bool("q", false, "")
	n := fs.Int("n", 0, "")
	pos, err := parseFlags(fs, []string{"a", "-q", "b", "--n", "3", "--", "-c", "d"})
	if err != nil || !*v || *n != 3 || !reflect.DeepEqual(pos, []string{"a", "b", "-c", "d"}) {
		t.Errorf("parseFlags = %v, %v (q=%v n=%d)", pos, err, *v, *n)
	}
	_, err = parseFlags(newFlagSet(e, "x", "", ""), []string{"--nope"})
	var ue usageError
	if !errors.As(err, &ue) {
		t.Errorf("unknown flag: err = %v, want a usageError", err)
	}
	_, err = parseFlags(newFlagSet(e, "x", "", ""), []string{"-h"})
	if !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: err = %v, want flag.ErrHelp", err)
	}
}

func TestOptBool(t *testing.T) {
	e := &env{stdout: io.Discard, stderr: io.Discard}
	var b, c optBool
	fs := newFlagSet(e, "x", "", "")
	fs.Var(&b, "direct", "")
	fs.Var(&c, "other", "")
	if _, err := parseFlags(fs, []string{"--direct"}); err != nil || !b.set || !b.v || c.set {
		t.Errorf("--direct: %+v %+v %v", b, c, err)
	}
	if _, err := parseFlags(fs, []string{"--direct=false"}); err != nil || !b.set || b.v {
		t.Errorf("--direct=false: %+v %v", b, err)
	}
}

func TestShortenTried(t *testing.T) {
	in := "libcufile unavailable: cannot load libcufile.so.0 (tried a: x (y); b: z); set it"
	want := "libcufile unavailable: cannot load libcufile.so.0 (not found); set it"
	if got := shortenTried(in); got != want {
		t.Errorf("shortenTried = %q, want %q", got, want)
	}
	if got := shortenTried("plain (words)"); got != "plain (words)" {
		t.Errorf("shortenTried changed %q", got)
	}
}

func TestCompareBytes(t *testing.T) {
	a := []byte{1, 2, 3, 4}
	if err := compareBytes([]byte{1, 2, 3, 4}, a); err != nil {
		t.Error(err)
	}
	err := compareBytes([]byte{1, 2, 0, 4}, a)
	if err == nil || !strings.Contains(err.Error(), "byte 2") {
		t.Errorf("compareBytes mismatch: %v", err)
	}
}

func TestPipeline(t *testing.T) {
	const size, chunk = 10*1000 + 7, 1000
	var mu sync.Mutex
	slots := [2][]byte{make([]byte, chunk), make([]byte, chunk)}
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, size)
	read := func(s int, off int64, n int) error {
		copy(slots[s][:n], src[off:])
		return nil
	}
	write := func(s int, off int64, n int) error {
		mu.Lock()
		defer mu.Unlock()
		copy(dst[off:], slots[s][:n])
		return nil
	}
	if err := pipeline(context.Background(), size, chunk, read, write, nil); err != nil || string(dst) != string(src) {
		t.Fatalf("pipeline: %v, equal=%v", err, string(dst) == string(src))
	}
	boom := errors.New("boom")
	failRead := func(s int, off int64, n int) error {
		if off >= 3*chunk {
			return boom
		}
		return nil
	}
	if err := pipeline(context.Background(), size, chunk, failRead, write, nil); !errors.Is(err, boom) {
		t.Errorf("read failure: %v", err)
	}
	writes := 0
	failWrite := func(s int, off int64, n int) error { writes++; return boom }
	if err := pipeline(context.Background(), size, chunk, read, failWrite, nil); !errors.Is(err, boom) || writes != 1 {
		t.Errorf("write failure: %v after %d writes", err, writes)
	}
}

func TestCeilingIO(t *testing.T) {
	for _, size := range []int64{1, 4096, 3*ceilingChunk + 12345} {
		p := filepath.Join(t.TempDir(), "f")
		src, freeSrc, err := allocHost(size)
		if err != nil {
			t.Fatal(err)
		}
		defer freeSrc()
		fillRandom(src)
		fd, dfd := openBoth(t, p, os.O_RDWR|os.O_CREATE)
		if err := ceilingIO(dfd, fd, true, src, size); err != nil {
			t.Fatalf("write %d: %v", size, err)
		}
		dst, freeDst, _ := allocHost(size)
		defer freeDst()
		if err := ceilingIO(dfd, fd, false, dst, size); err != nil {
			t.Fatalf("read %d: %v", size, err)
		}
		if err := compareBytes(dst, src); err != nil {
			t.Errorf("size %d: %v", size, err)
		}
	}
}

// openBoth opens p buffered and, where the file system allows, O_DIRECT.
func openBoth(t *testing.T, p string, flags int) (fd, dfd int) {
	t.Helper()
	f, err := os.OpenFile(p, flags, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	d, err := os.OpenFile(p, flags|unix.O_DIRECT, 0)
	if err != nil {
		return int(f.Fd()), int(f.Fd())
	}
	t.Cleanup(func() { d.Close() })
	return int(f.Fd()), int(d.Fd())
}

func TestReportMedianAndRatios(t *testing.T) {
	var r benchReport
	r.PageCache = "dropped before every read"
	r.add(benchCase{op: "read", path: "storage ceiling", memory: "host", threads: 16, ceiling: "storage"}, 1e9, []float64{0.5}, nil, true)
	r.add(benchCase{op: "read", path: "pcie ceiling", memory: "device", threads: 1, ceiling: "pcie"}, 1e9, []float64{0.25}, nil, false)
	r.add(benchCase{op: "read", path: "naive os.File+copy", memory: "device", threads: 1}, 1e9, []float64{2, 1, 4, 3}, nil, true)
	r.add(benchCase{op: "read", path: "kvik host", memory: "host", threads: 4}, 1e9, []float64{1, 0.5, 0.25}, nil, true)
	r.add(benchCase{op: "read", path: "kvik posix+bounce", memory: "device", threads: 4}, 1e9, []float64{1}, nil, true)
	r.finish()
	naive, host, dev := r.Results[2], r.Results[3], r.Results[4]
	// The median of an even count is the mean of the middle two GB/s,
	// 1/3 and 1/2 GB/s: 5/12, not 0.4 (the rate at the mean time, 2.5 s).
	if math.Abs(naive.MedianGBs-5.0/12) > 1e-12 || naive.MinGBs != 0.25 || naive.MaxGBs != 1 {
		t.Errorf("naive = %+v, want median 5/12, min 0.25, max 1", naive)
	}
	if *host.RatioToCeiling != 1 || math.Abs(*host.SpeedupNaive-4.8) > 1e-12 {
		t.Errorf("host ratios = %v, %v; want 1 (storage 2 GB/s), 4.8 (2 / (5/12))", *host.RatioToCeiling, *host.SpeedupNaive)
	}
	if *dev.RatioToCeiling != 0.5 {
		t.Errorf("device ratio = %v, want 0.5 (storage 2 GB/s < pcie 4 GB/s)", *dev.RatioToCeiling)
	}
	if r.Results[0].RatioToCeiling != nil || len(r.Notes) != 0 {
		t.Errorf("ceiling row has a ratio or unexpected notes: %+v %v", r.Results[0], r.Notes)
	}
}

// TestReportPairedCeiling checks that a row with paired ceiling timings
// is compared with them, not with the ceiling's own row.
func TestReportPairedCeiling(t *testing.T) {
	var r benchReport
	r.PageCache = "dropped before every read"
	r.add(benchCase{op: "read", path: "storage ceiling", memory: "host", threads: 16, ceiling: "storage"}, 1e9, []float64{0.5}, nil, true)
	r.add(benchCase{op: "read", path: "kvik host", memory: "host", threads: 1}, 1e9, []float64{1, 1.25, 1}, []float64{0.8, 1, 1.25}, true)
	r.add(benchCase{op: "read", path: "kvik host", memory: "host", threads: 16}, 1e9, []float64{1}, nil, true)
	r.finish()
	paired, plain := r.Results[1], r.Results[2]
	if paired.PairedCeilingGBs != 1 || *paired.RatioToCeiling != 1 {
		t.Errorf("paired row: ceiling %v GB/s, ratio %v; want 1 (median 1 s) and 1", paired.PairedCeilingGBs, *paired.RatioToCeiling)
	}
	if plain.PairedCeilingGBs != 0 || *plain.RatioToCeiling != 0.5 {
		t.Errorf("unpaired row: %v, ratio %v; want none and 0.5 (the ceiling row's 2 GB/s)", plain.PairedCeilingGBs, *plain.RatioToCeiling)
	}
}

func TestFormatVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Path: "github.com/kvikgo/kvik", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "00bddf274863cc95390cb76b89477cfd05b1b0a9"}, {Key: "vcs.time", Value: "2026-11-25T23:53:35Z"}, {Key: "vcs.modified", Value: "true"}}}
	want := "kvik devel, revision 00bddf274863cc95390cb76b89477cfd05b1b0a9 (modified), committed 2026-11-25T23:53:35Z, go1.99 " + runtime.GOOS + "/" + runtime.GOARCH
	if got := formatVersion(bi, true); got != want {
		t.Errorf("formatVersion = %q, want %q", got, want)
	}
	bi.Main.Version, bi.Settings = "v1.2.3", nil
	if got := formatVersion(bi, true); got != "kvik v1.2.3, go1.99 "+runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("formatVersion without VCS = %q", got)
	}
}

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 tensors"}, {1, "1 tensor"}, {2, "2 tensors"}} {
		if got := count(c.n, "tensor"); got != c.want {
			t.Errorf("count(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
