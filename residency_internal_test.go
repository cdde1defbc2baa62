package kvik

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkResidencyCheck measures the per-task residency check of a 4 MiB
// task on a cached file: the cost the auto policy adds to a warm read.
func BenchmarkResidencyCheck(b *testing.B) {
	path := filepath.Join(b.TempDir(), "warm.bin")
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := Open(path, "r", 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	pages := len(data) / pageSize
	b.Run("cachestat", func(b *testing.B) {
		if noCachestat.Load() {
			b.Skip("no cachestat(2) here")
		}
		for b.Loop() {
			if v, err := sampleResidency(f.fd, 0, pages); err != nil || v != sampleResident {
				b.Fatal(v, err)
			}
		}
	})
	b.Run("mincore", func(b *testing.B) {
		saved := noCachestat.Load()
		noCachestat.Store(true)
		defer noCachestat.Store(saved)
		for b.Loop() {
			if v, err := sampleResidency(f.fd, 0, pages); err != nil || v != sampleResident {
				b.Fatal(v, err)
			}
		}
	})
	b.Run("fullmap", func(b *testing.B) {
		for b.Loop() {
			if _, err := residentMap(f.fd, 0, pages); err != nil {
				b.Fatal(err)
			}
		}
	})
	buf := make([]byte, len(data))
	b.Run("pread4MiB", func(b *testing.B) {
		for b.Loop() {
			if _, err := f.hostTask(opRead, Defaults{DirectIOReadPolicy: ReadPolicyBuffered}, buf, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestSampleResidencyFallback checks that the mincore fallback reaches the
// verdicts of cachestat on a cached, a dropped and a half-dropped file.
func TestSampleResidencyFallback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "res.bin")
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i*13 + 5)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pages := len(data) / pageSize
	verdicts := func() (cs, mc int) {
		t.Helper()
		saved := noCachestat.Load()
		defer noCachestat.Store(saved)
		var err error
		if !saved {
			if cs, err = sampleResidency(f.fd, 0, pages); err != nil {
				t.Fatal(err)
			}
		}
		noCachestat.Store(true)
		if mc, err = sampleResidency(f.fd, 0, pages); err != nil {
			t.Fatal(err)
		}
		if saved {
			cs = mc
		}
		return cs, mc
	}
	if cs, mc := verdicts(); cs != sampleResident || mc != sampleResident {
		t.Fatalf("cached file: verdicts %d (cachestat), %d (mincore)", cs, mc)
	}
	if err := DropFilePageCache(path, 0, 0); err != nil {
		t.Fatal(err)
	}
	if res, _, _ := PageCacheInfo(path, 0, 0); res != 0 {
		t.Skipf("the file system keeps %d pages of a dropped file", res)
	}
	if cs, mc := verdicts(); cs != sampleCold || mc != sampleCold {
		t.Fatalf("dropped file: verdicts %d (cachestat), %d (mincore)", cs, mc)
	}
	// Cache the file, then drop its second half (reading only the first
	// half would let readahead cache the rest).
	if b, err := os.ReadFile(path); err != nil || len(b) != len(data) {
		t.Fatal(err)
	}
	if err := DropFilePageCache(path, 4<<20, 0); err != nil {
		t.Fatal(err)
	}
	if cs, mc := verdicts(); cs != sampleMixed || mc != sampleMixed {
		t.Fatalf("half-cached file: verdicts %d (cachestat), %d (mincore)", cs, mc)
	}
	m, err := residentMap(f.fd, 0, pages)
	if err != nil {
		t.Fatal(err)
	}
	if !m[0] || m[pages-1] {
		t.Fatalf("resident map of a half-cached file: first %v, last %v", m[0], m[pages-1])
	}
}

// TestReadWithoutCachestat reads a half-cached file through the mincore
// fallback, as on kernels before 6.5, and compares the bytes.
func TestReadWithoutCachestat(t *testing.T) {
	saved := noCachestat.Load()
	noCachestat.Store(true)
	defer noCachestat.Store(saved)
	path := filepath.Join(t.TempDir(), "res.bin")
	data := make([]byte, 12<<20+77)
	for i := range data {
		data[i] = byte(i*31 + i>>11)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Drop every other MiB, so that 4 MiB tasks are mixed.
	for off := int64(1 << 20); off < int64(len(data)); off += 2 << 20 {
		if err := DropFilePageCache(path, off, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := BuiltinDefaults()
	for _, off := range []int64{0, 4096, 12345} {
		buf := make([]byte, len(data)-int(off))
		for i := 0; i < len(buf); i += 4 << 20 {
			b := buf[i:min(i+4<<20, len(buf))]
			if n, err := f.hostTask(opRead, d, b, off+int64(i)); err != nil || n != len(b) {
				t.Fatalf("task at %d: %d, %v", off+int64(i), n, err)
			}
		}
		if string(buf) != string(data[off:]) {
			t.Fatalf("read from %d: bytes differ", off)
		}
	}
}

// TestCheckDeviceTask checks what one check decides for a device read
// task: one chunk only for a cold task, with few workers, under the auto
// or direct policy, on a file that has an O_DIRECT descriptor; buffered
// chunks for a cached task or one too small for a direct request.
func TestCheckDeviceTask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cold.bin")
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.fdDirect < 0 || f.inMemoryFS() {
		t.Skip("no O_DIRECT, or a memory file system: no cold tasks here")
	}
	d, _ := GetDefaults()
	d.DirectIOReadPolicy, d.AutoDirectIORead = ReadPolicyAuto, false
	d.NumThreads = 1
	if c := f.checkDeviceTask(d, 0, 4<<20); c.oneChunk || !c.buffered {
		t.Fatalf("a cached task: %+v, want buffered", c)
	}
	if err := DropFilePageCache(path, 0, 0); err != nil {
		t.Fatal(err)
	}
	if res, _, _ := PageCacheInfo(path, 0, 0); res != 0 {
		t.Skipf("the file system keeps %d pages of a dropped file", res)
	}
	if c := f.checkDeviceTask(d, 4096+17, 4<<20); !c.oneChunk || c.buffered {
		t.Fatalf("a dropped task: %+v, want one chunk", c)
	}
	if c := f.checkDeviceTask(d, 0, 64<<10); c.oneChunk || !c.buffered {
		t.Fatalf("a task under the smallest direct request: %+v, want buffered", c)
	}
	d.NumThreads = 16
	if c := f.checkDeviceTask(d, 0, 4<<20); c.oneChunk || c.buffered {
		t.Fatalf("cold with 16 workers: %+v, want neither (other tasks keep the drive busy; chunks read direct)", c)
	}
	d.NumThreads = 1
	d.DirectIOReadPolicy = ReadPolicyBuffered
	if c := f.checkDeviceTask(d, 0, 4<<20); c.oneChunk {
		t.Fatalf("the buffered policy: %+v, never one direct chunk", c)
	}
	d.DirectIOReadPolicy = ReadPolicyDirect
	if c := f.checkDeviceTask(d, 0, 4<<20); !c.oneChunk || c.buffered {
		t.Fatalf("the direct policy at 1 worker: %+v, want one chunk", c)
	}
}
