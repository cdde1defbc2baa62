package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// kvikBin is the kvik binary built once by TestMain, or the one named by
// $KVIK_TEST_BIN.
var kvikBin string

func TestMain(m *testing.M) {
	if kvikBin = os.Getenv("KVIK_TEST_BIN"); kvikBin != "" {
		os.Exit(m.Run()) // a prebuilt binary, on a machine without Go
	}
	dir, err := os.MkdirTemp("", "kvik-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kvikBin = filepath.Join(dir, "kvik")
	build := exec.Command("go", "build", "-o", kvikBin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building kvik:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is the outcome of one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

// runKvik runs the binary with args and the environment without KVIKIO_*
// variables, plus env.
func runKvik(t *testing.T, env []string, args ...string) result {
	t.Helper()
	k := kvikCommand(env, args...)
	return k.result(t, k.cmd.Run())
}

// runKvikWithin is runKvik for a run that must end within d: one still
// running then (blocked, say, opening a FIFO) is killed and fails t.
func runKvikWithin(t *testing.T, d time.Duration, env []string, args ...string) result {
	t.Helper()
	k := kvikCommand(env, args...)
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- k.cmd.Wait() }()
	select {
	case err := <-done:
		return k.result(t, err)
	case <-time.After(d):
		k.cmd.Process.Kill()
		<-done
		t.Fatalf("kvik %v: still running after %v", args, d)
		return result{}
	}
}

// kvikRun is a run of the binary and its output.
type kvikRun struct {
	cmd         *exec.Cmd
	out, stderr bytes.Buffer
}

// kvikCommand returns a run of the binary with args and the environment
// without KVIKIO_* variables, plus env, not started.
func kvikCommand(env []string, args ...string) *kvikRun {
	k := &kvikRun{cmd: exec.Command(kvikBin, args...)}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KVIKIO_") {
			k.cmd.Env = append(k.cmd.Env, kv)
		}
	}
	k.cmd.Env = append(k.cmd.Env, env...)
	k.cmd.Stdout, k.cmd.Stderr = &k.out, &k.stderr
	return k
}

// result is the outcome of the run, which ended with err.
func (k *kvikRun) result(t *testing.T, err error) result {
	t.Helper()
	r := result{stdout: k.out.String(), stderr: k.stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running kvik %v: %v", k.cmd.Args[1:], err)
	}
	return r
}

// expect fails the test unless r exited with code.
func (r result) expect(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// oneLineError checks that stderr is a single "kvik: ..." line holding
// every want.
func (r result) oneLineError(t *testing.T, want ...string) {
	t.Helper()
	msg := strings.TrimSuffix(r.stderr, "\n")
	if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "kvik: ") {
		t.Errorf("stderr is not one kvik: line: %q", r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("stderr %q lacks %q", msg, w)
		}
	}
}

// randomFile writes n random bytes, not all zero, to a new file.
func randomFile(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	if n > 0 {
		b[0] = 0x5a
	}
	p := filepath.Join(t.TempDir(), "src.bin")
	if err := os.WriteFile(p, b, 0o640); err != nil {
		t.Fatal(err)
	}
	return p
}

// hasGPU reports whether a CUDA device is usable here.
func hasGPU() bool { return gputest.Count() > 0 }

func TestHelp(t *testing.T) {
	r := runKvik(t, nil, "help").expect(t, 0)
	for _, w := range []string{"info", "bench", "cp", "Exit status"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("kvik help lacks %q:\n%s", w, r.stdout)
		}
	}
	for _, args := range [][]string{{"bench", "-h"}, {"help", "bench"}, {"cp", "--help"}, {"info", "-h"}} {
		r := runKvik(t, nil, args...).expect(t, 0)
		if !strings.Contains(r.stdout, "Usage: kvik "+args[len(args)-1]) && !strings.Contains(r.stdout, "Usage: kvik "+args[0]) {
			t.Errorf("kvik %v: no usage line:\n%s", args, r.stdout)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"bench", "--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"bench", "--size", "12Q"}, `invalid size "12Q"`},
		{[]string{"bench", "--threads", "1,0"}, "not a positive integer"},
		{[]string{"bench", "--memory", "gpu"}, `invalid --memory "gpu"`},
		{[]string{"bench", "--compat", "maybe"}, `invalid --compat "maybe"`},
		{[]string{"bench", "--repeats", "0"}, "--repeats 0"},
		{[]string{"bench", "--warmup", "-2"}, "--warmup -2"},
		{[]string{"bench", "--warmup", "soon"}, "want a count or auto"},
		{[]string{"bench", "--warmup", "auto", "--safetensors", "m.safetensors"}, "--warmup auto applies to the file benchmark"},
		{[]string{"bench", "--settle", "-1s"}, "--settle -1s"},
		{[]string{"bench", "--settle", "2"}, "invalid value \"2\" for flag -settle"},
		{[]string{"bench", "--slot", "1s"}, "--start-at and --slot go together"},
		{[]string{"bench", "--start-at", "1764150000", "--slot", "-1s"}, "--slot -1s"},
		{[]string{"bench", "--start-at", "soon", "--slot", "1s"}, "want Unix seconds"},
		{[]string{"bench", "--start-at", "1e10", "--slot", "1s"}, "want Unix seconds"},
		{[]string{"bench", "--start-at", "9.3e9", "--slot", "1s"}, "want Unix seconds"},
		{[]string{"bench", "--start-at", "NaN", "--slot", "1s"}, "want Unix seconds"},
		{[]string{"bench", "--paired-ceiling", "--no-baselines"}, "--paired-ceiling needs the ceilings"},
		{[]string{"bench", "extra"}, "unexpected argument"},
		{[]string{"cp", "only-one"}, "want two arguments"},
		{[]string{"cp", "--chunk", "-1", "a", "b"}, "invalid"},
		{[]string{"info", "a", "b"}, "too many arguments"},
		{[]string{"help", "nope"}, `unknown command "nope"`},
	}
	for _, c := range cases {
		r := runKvik(t, nil, c.args...).expect(t, 2)
		r.oneLineError(t, c.want)
	}
}

func TestMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "such-file")
	r := runKvik(t, nil, "cp", missing, filepath.Join(t.TempDir(), "dst")).expect(t, 1)
	r.oneLineError(t, "kvik: cp: ", missing, "no such file or directory")
	r = runKvik(t, nil, "info", missing).expect(t, 1)
	r.oneLineError(t, "kvik: info: ", missing, "no such file or directory")
	// The library's "kvik: " does not repeat after the command's prefix.
	r = runKvik(t, nil, "info", "ftp://x/y").expect(t, 1)
	r.oneLineError(t, "kvik: info: ", "ftp://x/y", "invalid argument")
	if strings.Count(r.stderr, "kvik:") != 1 {
		t.Errorf("kvik: twice in %q", r.stderr)
	}
	r = runKvik(t, nil, "bench", "--dir", missing, "--size", "1MiB").expect(t, 1)
	r.oneLineError(t, "kvik: bench: ", missing)
}

func TestInfo(t *testing.T) {
	r := runKvik(t, nil, "info").expect(t, 0)
	for _, w := range []string{"CUDA driver", "cuFile", "/run/udev", "nvidia-fs", "KVIKIO_NTHREADS", "built-in", "O_DIRECT", "compat mode", "file system"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("kvik info lacks %q:\n%s", w, r.stdout)
		}
	}
}

func TestInfoJSON(t *testing.T) {
	src := randomFile(t, 3*4096+10)
	r := runKvik(t, []string{"KVIKIO_NTHREADS=3"}, "info", "--json", src).expect(t, 0)
	var rep infoReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, r.stdout)
	}
	found := false
	for _, s := range rep.Defaults.Settings {
		if s.Env == "KVIKIO_NTHREADS" {
			found = true
			if s.Value != "3" || s.Source != "env" {
				t.Errorf("KVIKIO_NTHREADS setting = %+v, want 3 from env", s)
			}
		}
	}
	if !found || len(rep.Defaults.Settings) < 5 {
		t.Errorf("defaults incomplete: %+v", rep.Defaults)
	}
	p := rep.Path
	if p.Kind != "file" || p.Size != 3*4096+10 || p.PageCache == nil || p.PageCache.TotalPages != 4 || p.CompatMode == "" {
		t.Errorf("path info = %+v", p)
	}
	if rep.System.CPUs < 1 || rep.System.MemTotal <= 0 {
		t.Errorf("system info = %+v", rep.System)
	}
}

func TestInfoBadEnv(t *testing.T) {
	// The bad variable is reported once, in the Defaults section, and the
	// exit status says that something is wrong.
	src := randomFile(t, 5000)
	r := runKvik(t, []string{"KVIKIO_NTHREADS=lots"}, "info", src).expect(t, 1)
	if n := strings.Count(r.stdout+r.stderr, `KVIKIO_NTHREADS="lots"`); n != 1 {
		t.Errorf("info reports the bad variable %d times, want once:\n%s%s", n, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "using built-in values") {
		t.Errorf("info claims kvik uses built-in values:\n%s", r.stdout)
	}
	r = runKvik(t, []string{"KVIKIO_NTHREADS=lots"}, "info", "--json", src).expect(t, 1)
	var rep infoReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || !strings.Contains(rep.Defaults.Error, "KVIKIO_NTHREADS") || len(rep.Path.Errors) != 0 {
		t.Errorf("info --json with a bad variable: %v\n%s", err, r.stdout)
	}
	r = runKvik(t, nil, "info", src).expect(t, 0)
	if !regexp.MustCompile(`KVIKIO_AUTO_DIRECT_IO_READ +unset +\(built-in\)`).MatchString(r.stdout) {
		t.Errorf("info does not show KVIKIO_AUTO_DIRECT_IO_READ unset:\n%s", r.stdout)
	}
	r = runKvik(t, []string{"KVIKIO_NTHREADS=lots"}, "bench", "--size", "1MiB").expect(t, 1)
	r.oneLineError(t, "KVIKIO_NTHREADS")
}

func TestBenchTable(t *testing.T) {
	r := runKvik(t, nil, "bench", "--size", "4MiB", "--repeats", "1", "--dir", t.TempDir()).expect(t, 0)
	for _, w := range []string{"median GB/s", "vs ceiling", "storage ceiling", "naive os.File", "kvik host", "read", "write", "4 MiB"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("bench output lacks %q:\n%s", w, r.stdout)
		}
	}
}

func TestBenchJSON(t *testing.T) {
	dir := t.TempDir()
	r := runKvik(t, nil, "bench", "--size", "1000001", "--repeats", "2", "--warmup", "1", "--threads", "1,3", "--memory", "host",
		"--task-size", "64k", "--direct", "--drop-cache", "--paired-ceiling", "--dir", dir, "--json").expect(t, 0)
	var rep benchReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, r.stdout)
	}
	if rep.SizeBytes != 1000001 || rep.TaskSize != 64<<10 || !rep.DirectRead || rep.Repeats != 2 || rep.Warmup != 1 || rep.Memory != "host" {
		t.Errorf("header = %+v", rep)
	}
	// per op: storage ceiling, naive, kvik host x 2 thread counts
	if len(rep.Results) != 8 {
		t.Fatalf("%d results, want 8: %+v", len(rep.Results), rep.Results)
	}
	for _, x := range rep.Results {
		if !x.Verified || len(x.Seconds) != 2 || x.MedianGBs <= 0 {
			t.Errorf("result %+v: want verified, 2 timings, positive rate", x)
		}
		if x.Ceiling == "" && x.RatioToCeiling == nil {
			t.Errorf("result %+v lacks a ratio to its ceiling", x)
		}
		if (x.Ceiling == "") != (x.PairedCeilingGBs > 0) {
			t.Errorf("result %+v: want a paired ceiling on every row but the ceilings'", x)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("bench left files behind: %v", entries)
	}
}

// TestBenchWarmupAuto: --warmup auto runs each row untimed until it
// settles, and the report says how many runs the rows took.
func TestBenchWarmupAuto(t *testing.T) {
	r := runKvik(t, nil, "bench", "--size", "1000001", "--repeats", "1", "--warmup", "auto", "--threads", "2", "--memory", "host",
		"--dir", t.TempDir(), "--json").expect(t, 0)
	var rep benchReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, r.stdout)
	}
	if !rep.WarmupAuto || rep.WarmupRuns[0] < 3 || rep.WarmupRuns[1] < rep.WarmupRuns[0] || rep.WarmupRuns[1] > warmupMax || rep.Warmup != 0 {
		t.Errorf("header = %+v: want --warmup auto, 3 to %d untimed runs a row", rep, warmupMax)
	}
	text := runKvik(t, nil, "bench", "--size", "1000001", "--repeats", "1", "--warmup", "auto", "--threads", "2", "--memory", "host",
		"--op", "read", "--dir", t.TempDir()).expect(t, 0)
	if !strings.Contains(text.stdout, "untimed (--warmup auto: until three agreed within 5%") {
		t.Errorf("the table does not say how the rows were warmed up:\n%s", text.stdout)
	}
}

// TestSteadyWarmup: steadyWarmup stops at the first three times within
// 5% of each other, at its count or its time, and on an error.
func TestSteadyWarmup(t *testing.T) {
	cases := []struct {
		times []float64
		max   int
		limit time.Duration
		want  int
	}{
		{[]float64{10, 5, 3, 2, 1, 1.02, 1.04, 9}, 64, time.Hour, 7},     // ramped up, then steady
		{[]float64{1, 1, 1}, 64, time.Hour, 3},                           // steady from the start
		{[]float64{1, 1.06, 1, 1.06, 1, 1.06, 1, 1.06}, 5, time.Hour, 5}, // never within 5%: the count
		{[]float64{2, 1, 2, 1, 2, 1}, 64, 5 * time.Second, 3},            // the time: 5 s by the third
	}
	for i, c := range cases {
		k := 0
		n, err := steadyWarmup(func() (float64, error) { k++; return c.times[(k-1)%len(c.times)], nil }, c.max, c.limit)
		if err != nil || n != c.want || k != n {
			t.Errorf("case %d: %d runs (%d made), %v; want %d", i, n, k, err, c.want)
		}
	}
	boom := errors.New("boom")
	if n, err := steadyWarmup(func() (float64, error) { return 0, boom }, 64, time.Hour); !errors.Is(err, boom) || n != 1 {
		t.Errorf("an error: %d runs, %v", n, err)
	}
}

func TestBenchExistingFile(t *testing.T) {
	src := randomFile(t, 2<<20)
	before, _ := os.ReadFile(src)
	r := runKvik(t, nil, "bench", "--file", src, "--repeats", "1", "--json").expect(t, 0)
	var rep benchReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("invalid JSON: %v", err)
	}
	for _, x := range rep.Results {
		if x.Op != "read" {
			t.Errorf("an existing file was benchmarked with %s", x.Op)
		}
	}
	if after, _ := os.ReadFile(src); !bytes.Equal(before, after) {
		t.Error("bench changed an existing --file")
	}
	runKvik(t, nil, "bench", "--file", src, "--op", "both").expect(t, 2).oneLineError(t, "overwrite")
}

func TestCp(t *testing.T) {
	for _, n := range []int{0, 1, 4096, 5<<20 + 123} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			src := randomFile(t, n)
			dst := filepath.Join(t.TempDir(), "dst.bin")
			r := runKvik(t, nil, "cp", "--memory", "host", "--chunk", "1MiB", src, dst).expect(t, 0)
			if !strings.Contains(r.stdout, "verified") {
				t.Errorf("cp output lacks verified: %q", r.stdout)
			}
			if n == 1 && !strings.Contains(r.stdout, "(1 byte)") {
				t.Errorf("cp of one byte: %q", r.stdout)
			}
			sameFile(t, src, dst)
		})
	}
}

func TestCpIntoDirectory(t *testing.T) {
	src := randomFile(t, 100000)
	dir := t.TempDir()
	runKvik(t, nil, "cp", src, dir, "--memory=host").expect(t, 0)
	sameFile(t, src, filepath.Join(dir, filepath.Base(src)))
	if fi, err := os.Stat(filepath.Join(dir, filepath.Base(src))); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("copy mode = %v, %v; want 0640", fi.Mode(), err)
	}
	runKvik(t, nil, "cp", src, src).expect(t, 1).oneLineError(t, "same file")
	// A missing directory is made, as for a URL source (docs/cli.md).
	newDir := filepath.Join(dir, "new", "sub") + "/"
	runKvik(t, nil, "cp", src, newDir, "--memory=host").expect(t, 0)
	sameFile(t, src, filepath.Join(newDir, filepath.Base(src)))
}

func TestCpWithoutGPU(t *testing.T) {
	if hasGPU() {
		t.Skip("a GPU is present")
	}
	src := randomFile(t, 10)
	r := runKvik(t, nil, "cp", "--memory", "device", src, filepath.Join(t.TempDir(), "d")).expect(t, 1)
	r.oneLineError(t, "needs a GPU")
	r = runKvik(t, nil, "bench", "--memory", "device", "--size", "1MiB").expect(t, 1)
	r.oneLineError(t, "needs a GPU")
	// One short line without the driver; -v adds the paths tried.
	if cuda.Load() != nil {
		r.oneLineError(t, "no CUDA driver (libcuda.so.1 not found)")
		if len(r.stderr) > 160 || strings.Contains(r.stderr, "tried") {
			t.Errorf("error is not short: %q", r.stderr)
		}
		r = runKvik(t, nil, "bench", "-v", "--memory", "device", "--size", "1MiB").expect(t, 1)
		if !strings.Contains(r.stderr, "tried libcuda.so.1: ") {
			t.Errorf("-v does not show the paths tried: %q", r.stderr)
		}
	}
}

// TestDeviceMemory runs bench and cp through GPU memory; it needs a GPU.
func TestDeviceMemory(t *testing.T) {
	if !hasGPU() {
		t.Skip("no GPU")
	}
	r := runKvik(t, nil, "bench", "--memory", "device", "--size", "8MiB", "--repeats", "1", "--threads", "2", "--json", "--dir", t.TempDir()).expect(t, 0)
	var rep benchReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("invalid JSON: %v", err)
	}
	paths := map[string]bool{}
	for _, x := range rep.Results {
		paths[x.Path] = true
		if x.Ceiling != "pcie" && !x.Verified {
			t.Errorf("unverified result %+v", x)
		}
	}
	for _, p := range []string{"pcie ceiling", "naive os.File+copy", "kvik posix+bounce", "kvik host"} {
		if !paths[p] {
			t.Errorf("device bench lacks %q: %v", p, paths)
		}
	}
	src := randomFile(t, 3<<20+5)
	dst := filepath.Join(t.TempDir(), "dst")
	runKvik(t, nil, "cp", "--memory", "device", "--chunk", "1MiB", src, dst).expect(t, 0)
	sameFile(t, src, dst)
}

// sameFile fails unless the files at a and b hold the same bytes.
func sameFile(t *testing.T, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, y) {
		t.Errorf("%s and %s differ (%d and %d bytes)", a, b, len(x), len(y))
	}
}

// TestBenchProfiles checks that --cpuprofile and --trace leave a profile
// pprof can read and a trace that starts with the trace header.
func TestBenchProfiles(t *testing.T) {
	dir := t.TempDir()
	prof, tr := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "run.trace")
	runKvik(t, nil, "bench", "--size", "3MiB", "--memory", "host", "--threads", "2", "--repeats", "1",
		"--no-baselines", "--dir", dir, "--cpuprofile", prof, "--trace", tr).expect(t, 0)
	p, err := os.ReadFile(prof)
	if err != nil || len(p) < 2 || p[0] != 0x1f || p[1] != 0x8b { // pprof writes gzip
		t.Fatalf("CPU profile: %d bytes, %v", len(p), err)
	}
	b, err := os.ReadFile(tr)
	if err != nil || !bytes.HasPrefix(b, []byte("go 1.")) {
		t.Fatalf("trace: %d bytes starting %q, %v", len(b), b[:min(len(b), 8)], err)
	}
	runKvik(t, nil, "bench", "--size", "1MiB", "--no-baselines", "--dir", dir, "--cpuprofile", filepath.Join(dir, "no", "such", "dir")).expect(t, 1)
}

func TestVersion(t *testing.T) {
	out := runKvik(t, nil, "version").expect(t, 0).stdout
	if !strings.HasPrefix(out, "kvik ") || !strings.Contains(out, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH) || strings.Count(out, "\n") != 1 {
		t.Errorf("kvik version = %q", out)
	}
	for _, flag := range []string{"-version", "--version"} {
		if got := runKvik(t, nil, flag).expect(t, 0).stdout; got != out {
			t.Errorf("kvik %s = %q, kvik version = %q", flag, got, out)
		}
	}
	runKvik(t, nil, "version", "extra").expect(t, 2)
	if help := runKvik(t, nil, "help").expect(t, 0).stdout; !strings.Contains(help, "version") {
		t.Errorf("help lacks version:\n%s", help)
	}
}

// TestCpKeepsDestination copies over an existing private file and
// through a symbolic link: the destination keeps its mode, the link
// stays and its target gets the copy.
func TestCpKeepsDestination(t *testing.T) {
	src := randomFile(t, 70000) // 0640
	dir := t.TempDir()
	dst, target, link := filepath.Join(dir, "private.bin"), filepath.Join(dir, "target.bin"), filepath.Join(dir, "link.bin")
	for _, p := range []string{dst, target} {
		if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("target.bin", link); err != nil {
		t.Fatal(err)
	}
	runKvik(t, nil, "cp", "--memory", "host", src, dst).expect(t, 0)
	runKvik(t, nil, "cp", "--memory", "host", src, link).expect(t, 0)
	sameFile(t, src, dst)
	sameFile(t, src, target)
	for _, p := range []string{dst, target} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600 kept", filepath.Base(p), fi.Mode(), err)
		}
	}
	if l, err := os.Readlink(link); err != nil || l != "target.bin" {
		t.Errorf("link replaced: %q, %v", l, err)
	}
}
