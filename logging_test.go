package kvik_test

// Logging: levels under KvikIO's names, the built-in logger from
// KVIKIO_LOG_LEVEL and KVIKIO_LOG_FILE, SetLogger, and the records each
// event writes, with attributes. These tests change the process's logger
// and settings: they must not run in parallel.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/posix"
	"github.com/kvikgo/kvik/internal/testkit/logtest"
)

// captureLogs sends kvik's records of level and above to a capture for
// the rest of the test.
func captureLogs(t *testing.T, level slog.Level) *logtest.Capture {
	c := &logtest.Capture{Level: level}
	t.Cleanup(kvik.SetLogger(slog.New(c)))
	return c
}

func TestLogLevels(t *testing.T) {
	for s, want := range map[string]slog.Level{
		"TRACE": kvik.LevelTrace, "debug": kvik.LevelDebug, " Info ": kvik.LevelInfo, "WARN": kvik.LevelWarn,
		"error": kvik.LevelError, "Critical": kvik.LevelCritical, "off": kvik.LevelOff,
	} {
		got, err := kvik.ParseLogLevel(s)
		if err != nil || got != want {
			t.Errorf("ParseLogLevel(%q) = %v, %v; want %v", s, got, err, want)
		}
		if back, err := kvik.ParseLogLevel(kvik.LogLevelName(got)); err != nil || back != got {
			t.Errorf("%v does not round-trip through %q", got, kvik.LogLevelName(got))
		}
	}
	for _, s := range []string{"", "WARNING", "verbose", "3", "info+"} {
		if _, err := kvik.ParseLogLevel(s); !errors.Is(err, kvik.ErrInvalidArgument) {
			t.Errorf("ParseLogLevel(%q): %v, want ErrInvalidArgument", s, err)
		}
	}
	if !(kvik.LevelTrace < kvik.LevelDebug && kvik.LevelError < kvik.LevelCritical && kvik.LevelCritical < kvik.LevelOff) {
		t.Error("levels out of order")
	}
	// The built-in handler prints KvikIO's names, and drops what is below
	// its level.
	var buf bytes.Buffer
	l := slog.New(kvik.NewLogHandler(&buf, kvik.LevelTrace))
	l.Log(context.Background(), kvik.LevelTrace, "t")
	l.Log(context.Background(), kvik.LevelCritical, "c")
	slog.New(kvik.NewLogHandler(&buf, kvik.LevelWarn)).Info("dropped")
	if out := buf.String(); !strings.Contains(out, "level=TRACE msg=t") || !strings.Contains(out, "level=CRITICAL msg=c") || strings.Contains(out, "dropped") {
		t.Errorf("built-in handler wrote:\n%s", out)
	}
}

// TestLoggingOffByDefault: without KVIKIO_LOG_LEVEL nothing is logged,
// and Logger is a logger that discards everything.
func TestLoggingOffByDefault(t *testing.T) {
	if kvik.BuiltinDefaults().LogLevel != kvik.LevelOff {
		t.Fatalf("built-in log level %v, want OFF", kvik.BuiltinDefaults().LogLevel)
	}
	if _, set := os.LookupEnv("KVIKIO_LOG_LEVEL"); set {
		t.Skip("KVIKIO_LOG_LEVEL is set")
	}
	if kvik.Logger().Enabled(context.Background(), kvik.LevelCritical) {
		t.Fatal("logging is on without KVIKIO_LOG_LEVEL")
	}
	// SetLogger(nil) goes back to the built-in logger.
	c := &logtest.Capture{Level: kvik.LevelTrace}
	restore := kvik.SetLogger(slog.New(c))
	kvik.SetLogger(nil)
	if kvik.Logger().Enabled(context.Background(), kvik.LevelCritical) {
		t.Fatal("SetLogger(nil) left the application's logger")
	}
	restore()
}

// TestLogEnvFile runs a child with KVIKIO_LOG_LEVEL=debug and
// KVIKIO_LOG_FILE: the file, which held older text, is truncated and gets
// the child's records under KvikIO's level names.
func TestLogEnvFile(t *testing.T) {
	if os.Getenv("KVIK_TEST_CHILD") == "logfile" {
		d, err := kvik.GetDefaults()
		if err != nil || d.LogLevel != kvik.LevelDebug {
			t.Fatalf("settings %+v, %v", d, err)
		}
		f, err := kvik.Open(os.Getenv("KVIK_TEST_FILE"), "r", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.ReadAt(make([]byte, 3<<20), 0); err != nil {
			t.Fatal(err)
		}
		return
	}
	dir := t.TempDir()
	data, _ := writeRandomFile(t, rand.New(rand.NewPCG(50, 51)), dir, 3<<20)
	logPath := filepath.Join(dir, "kvik.log")
	if err := os.WriteFile(logPath, []byte("OLD TEXT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runChild(t, "TestLogEnvFile", "KVIK_TEST_CHILD=logfile", "KVIK_TEST_FILE="+data,
		"KVIKIO_LOG_LEVEL=debug", "KVIKIO_LOG_FILE="+logPath)
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	if strings.Contains(out, "OLD TEXT") {
		t.Fatalf("log file not truncated:\n%s", out)
	}
	for _, want := range []string{`level=INFO msg="kvik: open" path=` + data, "compat_mode=", "reason=", `level=DEBUG msg="kvik: read plan"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log file lacks %q:\n%s", want, out)
		}
	}
}

// TestLogEnvBadFile: a KVIKIO_LOG_FILE that cannot be opened is an
// ErrBadEnv error naming the variable, while logging is on; with logging
// off the variable has no effect, as in KvikIO.
func TestLogEnvBadFile(t *testing.T) {
	if os.Getenv("KVIK_TEST_CHILD") == "badlog" {
		_, err := kvik.GetDefaults()
		_, oerr := kvik.Open(os.Getenv("KVIK_TEST_FILE"), "r", 0)
		if os.Getenv("KVIKIO_LOG_LEVEL") == "off" {
			if err != nil || oerr != nil {
				t.Fatalf("logging off, bad KVIKIO_LOG_FILE: %v, %v", err, oerr)
			}
			return
		}
		if !errors.Is(err, kvik.ErrBadEnv) || !strings.Contains(err.Error(), "KVIKIO_LOG_FILE") || !errors.Is(oerr, kvik.ErrBadEnv) {
			t.Fatalf("bad KVIKIO_LOG_FILE: GetDefaults %v, Open %v", err, oerr)
		}
		return
	}
	data, _ := writeRandomFile(t, rand.New(rand.NewPCG(52, 53)), t.TempDir(), 10)
	bad := filepath.Join(t.TempDir(), "missing", "kvik.log")
	for _, level := range []string{"info", "off"} {
		runChild(t, "TestLogEnvBadFile", "KVIK_TEST_CHILD=badlog", "KVIK_TEST_FILE="+data,
			"KVIKIO_LOG_LEVEL="+level, "KVIKIO_LOG_FILE="+bad)
	}
}

// TestSetDefaultsLogFile switches the built-in logger on and to a file
// with SetDefaults, and back off with the restore function; a file that
// cannot be opened is refused without changing anything.
func TestSetDefaultsLogFile(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "set.log")
	data, _ := writeRandomFile(t, rand.New(rand.NewPCG(54, 55)), dir, 100)
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.LogLevel, d.LogFile = kvik.LevelInfo, logPath })
	if err != nil {
		t.Fatal(err)
	}
	f, err := kvik.Open(data, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	restore()
	if f, err = kvik.Open(data, "r", 0); err != nil { // logging off again
		t.Fatal(err)
	}
	f.Close()
	b, _ := os.ReadFile(logPath)
	if n := strings.Count(string(b), `msg="kvik: open"`); n != 1 {
		t.Fatalf("%d open records in the log file, want 1:\n%s", n, b)
	}
	before, _ := kvik.GetDefaults()
	if _, err := kvik.UpdateDefaults(func(d *kvik.Defaults) {
		d.LogLevel, d.LogFile = kvik.LevelInfo, filepath.Join(dir, "no", "such", "dir")
	}); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("unusable log file: %v", err)
	}
	if after, _ := kvik.GetDefaults(); after != before {
		t.Fatalf("a refused log file changed the settings: %+v", after)
	}
}

// TestLogOpen checks the record of each handle's compat decision: the
// mode it resolved to and the reason it gives, and its O_DIRECT
// descriptor. On a machine with cuFile, CompatOff opens and is logged
// too.
func TestLogOpen(t *testing.T) {
	c := captureLogs(t, kvik.LevelInfo)
	path, _ := writeRandomFile(t, rand.New(rand.NewPCG(56, 57)), testDir(t), 4096)
	for _, mode := range []kvik.CompatMode{kvik.CompatOn, kvik.CompatAuto, kvik.CompatOff} {
		c.Reset()
		f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(mode))
		if err != nil {
			if mode == kvik.CompatOff && errors.Is(err, kvik.ErrCuFileRequired) {
				if len(c.Find("kvik: open")) != 0 {
					t.Fatalf("a refused open was logged: %s", c.Text())
				}
				continue
			}
			t.Fatal(err)
		}
		recs := c.Find("kvik: open")
		if len(recs) != 1 {
			t.Fatalf("%v: %d open records:\n%s", mode, len(recs), c.Text())
		}
		a := recs[0].Attrs
		if a["path"] != path || a["requested"] != mode.String() || a["compat_mode"] != f.CompatMode().String() ||
			a["reason"] != f.CompatReason() || a["direct_io"] != fmt.Sprint(f.IsDirectIOSupported()) {
			t.Fatalf("%v: record %v for a handle with mode %v, reason %q", mode, a, f.CompatMode(), f.CompatReason())
		}
		f.Close()
	}
}

// TestLogDirectFallback makes O_DIRECT reads fail with EINVAL: each is
// finished buffered and recorded with where it happened.
func TestLogDirectFallback(t *testing.T) {
	c := captureLogs(t, kvik.LevelInfo)
	rng := rand.New(rand.NewPCG(58, 59))
	_, f, data := directFile(t, rng, 1<<20)
	setDefaults(t, func(d *kvik.Defaults) { d.AutoDirectIORead, d.DirectIOReadPolicy = false, kvik.ReadPolicyDirect })
	refuseDirect(t, f)
	got := make([]byte, 256<<10)
	if n, err := f.ReadAt(got, 8192); n != len(got) || err != nil || !bytes.Equal(got, data[8192:8192+len(got)]) {
		t.Fatalf("ReadAt: %d, %v", n, err)
	}
	recs := c.Find("kvik: O_DIRECT refused, buffered I/O instead")
	if len(recs) != 1 {
		t.Fatalf("%d fallback records:\n%s", len(recs), c.Text())
	}
	if a := recs[0].Attrs; a["path"] != f.Name() || a["op"] != "read" || a["offset"] != "8192" || a["size"] != fmt.Sprint(len(got)) || !strings.Contains(a["error"], "invalid argument") {
		t.Fatalf("fallback record %v", a)
	}
}

// TestLogReadPlanAndBounce checks the debug records of the residency
// policy (a cold task planned direct, then the same task cached planned
// buffered) and of the bounce buffer pool growing.
func TestLogReadPlanAndBounce(t *testing.T) {
	rng := rand.New(rand.NewPCG(60, 61))
	_, f, data := directFile(t, rng, 4<<20)
	canDrop, why := resCanDrop(t, f.Name())
	if !canDrop {
		t.Skipf("page cache cannot be dropped here: %s", why)
	}
	c := captureLogs(t, kvik.LevelDebug)
	setDefaults(t, func(d *kvik.Defaults) {
		d.AutoDirectIORead, d.DirectIOReadPolicy, d.TaskSize = false, kvik.ReadPolicyAuto, 4<<20
	})
	kvik.FreeBounceBuffers()
	got := make([]byte, 2<<20+1) // unaligned in memory: direct reads go through a bounce buffer
	dst := got[1:]
	for _, verdict := range []string{"cold", "resident"} {
		if verdict == "resident" {
			resWarm(t, f.Name(), 0, len(data)) // direct reads leave nothing cached
		}
		if n, err := f.ReadAt(dst, 0); n != len(dst) || err != nil || !bytes.Equal(dst, data[:len(dst)]) {
			t.Fatalf("ReadAt: %d, %v", n, err)
		}
		recs := c.Find("kvik: read plan")
		if len(recs) == 0 {
			t.Fatalf("no read plan record:\n%s", c.Text())
		}
		a := recs[len(recs)-1].Attrs
		direct := verdict == "cold"
		if a["path"] != f.Name() || a["sample"] != verdict || a["size"] != fmt.Sprint(len(dst)) || (a["direct_bytes"] != "0") == !direct {
			t.Fatalf("%s read: plan record %v", verdict, a)
		}
	}
	recs := c.Find("kvik: bounce buffers allocated")
	if !slices.ContainsFunc(recs, func(r logtest.Record) bool { return r.Attrs["pool"] == "host" && r.Attrs["pinned"] == "false" }) {
		t.Fatalf("no host bounce buffer record:\n%s", c.Text())
	}
}

// directFile writes a file of size random bytes, opens it, and skips the
// test where the file system refuses O_DIRECT.
func directFile(t *testing.T, rng *rand.Rand, size int) (*os.File, *kvik.FileHandle, []byte) {
	t.Helper()
	path, data := resFile(t, rng, size)
	ref, f := openWithReference(t, path)
	if !f.IsDirectIOSupported() {
		t.Skipf("the file system under %s refuses O_DIRECT", path)
	}
	return ref, f, data
}

// refuseDirect makes every pread on f's O_DIRECT descriptor fail with
// EINVAL, as a file system does that wants another alignment, for the
// rest of the test.
func refuseDirect(t *testing.T, f *kvik.FileHandle) {
	saved := posix.CurrentSyscalls()
	dfd := f.FdDirect()
	next := saved
	next.Pread = func(fd int, p []byte, off int64) (int, error) {
		if fd == dfd {
			return 0, syscall.EINVAL
		}
		return saved.Pread(fd, p, off)
	}
	posix.SetSyscalls(next)
	t.Cleanup(func() { posix.SetSyscalls(saved) })
}

// TestLogDevicePlan (GPU) reads a cold file into device memory through
// the POSIX path under the auto read policy: the residency check of each
// device task is recorded.
func TestLogDevicePlan(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(62, 63))
	path, data := resFile(t, rng, 8<<20)
	if canDrop, why := resCanDrop(t, path); !canDrop {
		t.Skipf("page cache cannot be dropped here: %s", why)
	}
	f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOn))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	setDefaults(t, func(d *kvik.Defaults) {
		d.AutoDirectIORead, d.DirectIOReadPolicy, d.TaskSize, d.NumThreads = false, kvik.ReadPolicyAuto, 4<<20, 2
	})
	c := captureLogs(t, kvik.LevelDebug)
	dev := devAlloc(t, ctx, len(data))
	if n, err := f.ReadDevice(dev.Ptr(), len(data), 0, 0); n != len(data) || err != nil {
		t.Fatalf("ReadDevice: %d, %v", n, err)
	}
	if !bytes.Equal(fromDevice(t, ctx, dev.Ptr(), len(data)), data) {
		t.Fatal("bytes differ")
	}
	recs := c.Find("kvik: device read plan")
	if len(recs) != 2 {
		t.Fatalf("%d device plan records for 2 tasks:\n%s", len(recs), c.Text())
	}
	for _, r := range recs {
		if r.Attrs["path"] != path || r.Attrs["sample"] != "cold" || r.Attrs["buffered"] != "false" {
			t.Fatalf("device plan record %v", r.Attrs)
		}
	}
}
