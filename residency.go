package kvik

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/internal/sched"
	"github.com/kvikgo/kvik/internal/staging"
)

// The residency policy (ReadPolicyAuto) reads what the page cache holds
// with buffered I/O, at memory speed, and what it does not with O_DIRECT,
// at the storage's speed without the page cache's copy and without
// parallel workers defeating each other's readahead. It checks each task
// once: a few sampled places (cachestat(2), or mincore on kernels without
// it) decide the common cases, all cached and none cached; only a task
// whose samples disagree gets a full mincore map. A task whose samples
// are all cached is read buffered even if it has holes between them: the
// kernel's readahead fills those.
var residencyRule = sched.ResidencyRule{
	// Direct requests of 1 MiB or more keep the drive streaming; shorter
	// cold runs are read buffered, with a readahead hint.
	MinDirect: (1 << 20) / pageSize,
	// Re-reading up to 256 KiB of cached data from the drive costs less
	// than cutting a direct request in two.
	MaxIsland: (256 << 10) / pageSize,
}

// residencySamples returns how many places to sample in a middle of pages
// pages: one per 256 pages (1 MiB), from 2 to 64, so that the check
// stays well under 1% of a task read from the page cache.
func residencySamples(pages int) int {
	return min(max(pages/256, 2), 64, pages)
}

// ps64 is the page size as an int64, for file offsets.
var ps64 = int64(pageSize)

// residencyState holds what the residency policy learns about a file once.
type residencyState struct {
	once  sync.Once
	memFS bool // tmpfs or ramfs: the page cache is the file
}

// memFSMagics are the statfs types of file systems that live in memory.
var memFSMagics = map[int64]bool{unix.TMPFS_MAGIC: true, unix.RAMFS_MAGIC: true, unix.HUGETLBFS_MAGIC: true}

// inMemoryFS reports whether f lives on a memory file system, where every
// byte is cached and residency checks would be wasted.
func (f *FileHandle) inMemoryFS() bool {
	f.res.once.Do(func() { f.res.memFS = inMemory(f.fd) })
	return f.res.memFS
}

// inMemory reports whether the file of fd lies in a file system held in
// memory only (memFSMagics: tmpfs, /dev/shm, ramfs), where every byte is
// cached and fsync(2) stores nothing: a PendingFile's commit there skips
// its syncs, four system calls of the sixteen of a Zarr chunk's save.
// Asked per file, not remembered per device number, which a network file
// system may take over once a tmpfs is unmounted.
func inMemory(fd int) bool {
	var st unix.Statfs_t
	return unix.Fstatfs(fd, &st) == nil && memFSMagics[int64(st.Type)]
}

// planRead plans one read task of n bytes at off under settings d.
func (f *FileHandle) planRead(d Defaults, off int64, n int) []sched.Segment {
	switch d.ReadPolicy() {
	case ReadPolicyDirect:
		return sched.Segments(off, n, pageSize, f.fdDirect >= 0)
	case ReadPolicyBuffered:
		return sched.Segments(off, n, pageSize, false)
	}
	segs, verdict := f.planAuto(off, n, true)
	if l := logAt(LevelDebug); l != nil {
		var direct int
		for _, s := range segs {
			if s.Direct {
				direct += s.Len
			}
		}
		l.LogAttrs(context.Background(), LevelDebug, "kvik: read plan", slog.String("path", f.name),
			slog.Int64("offset", off), slog.Int("size", n), slog.String("sample", verdictNames[verdict]),
			slog.Int("direct_bytes", direct), slog.Int("buffered_bytes", n-direct))
	}
	return segs
}

// Residency verdicts of a task's sample.
const (
	sampleResident = iota
	sampleCold
	sampleMixed
	// sampleSkipped: too small for a direct request, or on a memory
	// file system; read buffered, counted as resident by ReadPlan.
	sampleSkipped
)

// verdictNames name the verdicts in log records.
var verdictNames = [...]string{sampleResident: "resident", sampleCold: "cold", sampleMixed: "mixed", sampleSkipped: "skipped"}

// planAuto plans a read task by page-cache residency and, with hint,
// starts readahead of the cold ranges that stay buffered. The second
// result says what the sample found (for ReadPlan).
func (f *FileHandle) planAuto(off int64, n int, hint bool) ([]sched.Segment, int) {
	buffered := sched.Segments(off, n, pageSize, false)
	start, end := sched.Middle(off, n, pageSize)
	if end-start < int64(residencyRule.MinDirect)*ps64 || f.inMemoryFS() {
		return buffered, sampleSkipped
	}
	pages := int((end - start) / ps64)
	verdict, err := sampleResidency(f.fd, start, pages)
	switch {
	case err != nil || verdict == sampleResident:
		return buffered, sampleResident
	case f.fdDirect < 0:
		// No O_DIRECT here: ask for the whole range at once, so that
		// parallel workers do not each wait on small readahead windows.
		if hint {
			unix.Fadvise(f.fd, off, int64(n), unix.FADV_WILLNEED)
		}
		return buffered, verdict
	case verdict == sampleCold:
		return sched.Segments(off, n, pageSize, true), verdict
	}
	resident, err := residentMap(f.fd, start, pages)
	if err != nil {
		return buffered, verdict
	}
	segs := sched.PlanByResidency(off, n, pageSize, resident, residencyRule)
	for _, s := range segs {
		if hint && !s.Direct && hasCold(resident, start, s) {
			unix.Fadvise(f.fd, s.Off, int64(s.Len), unix.FADV_WILLNEED)
		}
	}
	return segs, verdict
}

// hasCold reports whether buffered segment s covers a page that resident
// (the map of the middle starting at start) marks as not cached.
func hasCold(resident []bool, start int64, s sched.Segment) bool {
	first := max((s.Off-start)/ps64, 0)
	last := min((s.Off+int64(s.Len)-start+ps64-1)/ps64, int64(len(resident)))
	for i := first; i < last; i++ {
		if !resident[i] {
			return true
		}
	}
	return false
}

// noCachestat is set once cachestat(2) has failed as missing (kernels
// before 6.5) or refused (seccomp); mincore on a mapping is used instead.
var noCachestat atomic.Bool

// sampleWindow is the number of pages each cachestat sample counts.
const sampleWindow = 4

// sampleResidency checks residencySamples(pages) places spread evenly over
// the pages pages at the page-aligned offset start: windows of
// sampleWindow pages with cachestat(2), which counts the cached pages of a
// range in one call, or single pages with mincore on a short-lived mapping
// where the kernel lacks cachestat. Counting the whole range would cost a
// page-cache lookup per page, about 6 µs for a 4 MiB task cached in small
// folios (1% of reading it from the page cache); its 4 samples cost about
// 1.2 µs.
func sampleResidency(fd int, start int64, pages int) (int, error) {
	k := residencySamples(pages)
	at := func(i int) int { return i * (pages - 1) / max(k-1, 1) }
	if !noCachestat.Load() {
		cached, sampled := 0, 0
		var err error
		for i := range k {
			p := at(i)
			w := min(sampleWindow, pages-p)
			var st unix.Cachestat_t
			r := unix.CachestatRange{Off: uint64(start) + uint64(p*pageSize), Len: uint64(w * pageSize)}
			if err = unix.Cachestat(uint(fd), &r, &st, 0); err != nil {
				break
			}
			cached, sampled = cached+int(st.Cache), sampled+w
		}
		if err == nil {
			return verdictOf(cached, sampled), nil
		}
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EOPNOTSUPP) {
			return 0, err
		}
		noCachestat.Store(true)
	}
	data, err := unix.Mmap(fd, start, pages*pageSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(data)
	var vec [1]byte
	resident := 0
	for i := range k {
		p := at(i) * pageSize
		if err := pcMincore(data[p:p+pageSize], vec[:]); err != nil {
			return 0, err
		}
		resident += int(vec[0] & 1)
	}
	return verdictOf(resident, k), nil
}

func verdictOf(resident, sampled int) int {
	switch resident {
	case sampled:
		return sampleResident
	case 0:
		return sampleCold
	}
	return sampleMixed
}

// residentMap returns the residency of each of the pages pages at the
// page-aligned offset start, from mincore on a short-lived mapping.
func residentMap(fd int, start int64, pages int) ([]bool, error) {
	out := make([]bool, pages)
	window := max(int(pageCacheWindow/ps64), 1)
	vec := make([]byte, min(pages, window))
	for i := 0; i < pages; i += window {
		m := min(window, pages-i)
		data, err := unix.Mmap(fd, start+int64(i)*ps64, m*pageSize, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return nil, err
		}
		err = pcMincore(data, vec[:m])
		unix.Munmap(data)
		if err != nil {
			return nil, err
		}
		for j, v := range vec[:m] {
			out[i+j] = v&1 != 0
		}
	}
	return out, nil
}

// ReadPlan describes what a read of a range would do under the current
// settings (see DirectIOReadPolicy): how much of it is in the page cache
// and how many bytes would be read with O_DIRECT and how many buffered.
type ReadPlan struct {
	// Policy is the policy in force: DirectIOReadPolicy, or
	// ReadPolicyDirect when AutoDirectIORead is set.
	Policy ReadPolicy
	// ResidentPages of TotalPages pages of the range are in the page cache.
	ResidentPages, TotalPages int
	// DirectBytes and BufferedBytes split the range's bytes by how a read
	// of it, cut into TaskSize tasks, would transfer them.
	DirectBytes, BufferedBytes int64
	// ColdTasks, MixedTasks and ResidentTasks count the tasks whose
	// sampled pages were all uncached, mixed, or all cached (auto policy
	// only; tasks too small for a direct request count as resident).
	ColdTasks, MixedTasks, ResidentTasks int
}

// ReadPlan reports what a read of length bytes at offset would do under
// the current settings, without reading: the residency check and the plan
// are those a read makes. A length of zero or less means "to the end of
// the file".
func (f *FileHandle) ReadPlan(offset, length int64) (ReadPlan, error) {
	if err := f.enter(); err != nil {
		return ReadPlan{}, f.pathErr(opRead, err)
	}
	defer f.release()
	d, _ := GetDefaults()
	p := ReadPlan{Policy: d.ReadPolicy()}
	var size int64
	var err error
	if p.ResidentPages, p.TotalPages, size, err = pcInfoSize(f.fd, f.name, offset, length); err != nil {
		return p, err
	}
	end := rangeEnd(size, offset, length)
	for off := offset; off < end; off += int64(d.TaskSize) {
		n := int(min(int64(d.TaskSize), end-off))
		var segs []sched.Segment
		if p.Policy == ReadPolicyAuto {
			var verdict int
			segs, verdict = f.planAuto(off, n, false)
			p.countTask(verdict)
		} else {
			segs = f.planRead(d, off, n)
		}
		for _, s := range segs {
			if s.Direct {
				p.DirectBytes += int64(s.Len)
			} else {
				p.BufferedBytes += int64(s.Len)
			}
		}
	}
	return p, nil
}

func (p *ReadPlan) countTask(verdict int) {
	switch verdict {
	case sampleCold:
		p.ColdTasks++
	case sampleMixed:
		p.MixedTasks++
	default:
		p.ResidentTasks++
	}
}

// String summarises the plan in one line.
func (p ReadPlan) String() string {
	total := p.DirectBytes + p.BufferedBytes
	pct := func(n int64) float64 {
		if total == 0 {
			return 0
		}
		return 100 * float64(n) / float64(total)
	}
	return fmt.Sprintf("policy %s: %.1f%% O_DIRECT, %.1f%% buffered", p.Policy, pct(p.DirectBytes), pct(p.BufferedBytes))
}

// deviceTaskCheck is what one residency check of a device read task
// decides for the whole task.
type deviceTaskCheck struct {
	// oneChunk: the task goes to the drive with O_DIRECT and with fewer
	// workers than tune.directQueueDepth, so it is staged as one chunk, which
	// directRead splits into concurrent requests.
	oneChunk bool
	// buffered: the sampled pages are all cached (or the task is too
	// small for a direct request), so its chunks are read buffered
	// without checking each of them again.
	buffered bool
}

// checkDeviceTask checks a device read task of n bytes at off once, for
// all its chunks.
func (f *FileHandle) checkDeviceTask(d Defaults, off int64, n int) deviceTaskCheck {
	c, verdict := f.checkDeviceTaskSample(d, off, n)
	if l := logAt(LevelDebug); l != nil && d.ReadPolicy() == ReadPolicyAuto {
		l.LogAttrs(context.Background(), LevelDebug, "kvik: device read plan", slog.String("path", f.name),
			slog.Int64("offset", off), slog.Int("size", n), slog.String("sample", verdict),
			slog.Bool("buffered", c.buffered), slog.Bool("one_chunk", c.oneChunk))
	}
	return c
}

// checkDeviceTaskSample is checkDeviceTask, with what the sample found
// ("" outside the auto policy).
func (f *FileHandle) checkDeviceTaskSample(d Defaults, off int64, n int) (deviceTaskCheck, string) {
	few := f.fdDirect >= 0 && d.NumThreads*2 <= tune.directQueueDepth
	switch d.ReadPolicy() {
	case ReadPolicyDirect:
		return deviceTaskCheck{oneChunk: few}, ""
	case ReadPolicyBuffered:
		return deviceTaskCheck{}, ""
	}
	start, end := sched.Middle(off, n, pageSize)
	if end-start < int64(residencyRule.MinDirect)*ps64 || f.inMemoryFS() {
		return deviceTaskCheck{buffered: true}, verdictNames[sampleSkipped] // what planAuto would do
	}
	v, err := sampleResidency(f.fd, start, int((end-start)/ps64))
	switch {
	case err != nil:
		return deviceTaskCheck{}, "error"
	case v == sampleResident:
		return deviceTaskCheck{buffered: true}, verdictNames[v]
	case v == sampleCold:
		return deviceTaskCheck{oneChunk: few}, verdictNames[v]
	}
	return deviceTaskCheck{}, verdictNames[v]
}

// directRead reads page-aligned b at page-aligned off with O_DIRECT, in
// up to tune.directQueueDepth/NumThreads concurrent requests.
func (f *FileHandle) directRead(d Defaults, b []byte, off int64) (int, error) {
	pieces := min(tune.directQueueDepth/max(d.NumThreads, 1), len(b)/tune.minDirectPiece)
	if pieces < 2 {
		return f.directIO(opRead, d, b, off)
	}
	size := staging.AlignUp((len(b)+pieces-1)/pieces, pageSize)
	type result struct {
		n   int
		err error
	}
	res := make([]result, (len(b)+size-1)/size)
	// Every piece, the first too, on a goroutine of its own: a worker
	// that read one piece itself blocked in the system call while the
	// others might still wait in its processor's run queue (a cold 2 GiB
	// host read at 1 worker on the H200: 1.69-1.80 GB/s against 1.53-1.73
	// with the worker reading the first piece, alternating in one call).
	var wg sync.WaitGroup
	for i := range res {
		p := b[i*size : min((i+1)*size, len(b))]
		wg.Go(func() {
			res[i].n, res[i].err = f.directIO(opRead, d, p, off+int64(i*size))
		})
	}
	wg.Wait()
	// Report the prefix that is complete, and the first piece's error.
	done := 0
	for i, r := range res {
		done += r.n
		if r.err != nil {
			return done, r.err
		}
		if want := min(size, len(b)-i*size); r.n < want {
			return done, io.ErrUnexpectedEOF // a piece fell short without an error
		}
	}
	return done, nil
}
