package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/cufile"
)

// benchCase is one configuration to measure: one row of the table.
type benchCase struct {
	op       string // "read" or "write"
	path     string // what is measured: "kvik host", "naive os.File", ...
	memory   string // "host" or "device"
	threads  int
	ceiling  string // "storage" or "pcie" for a ceiling row
	optional bool   // when open fails, skip the row with a note
	open     func() (trial, error)
}

// trial is an opened benchCase.
type trial struct {
	run    func() error // one timed repetition
	verify func() error // checks the data after the first run; nil for none
	close  func()
	path   string // replaces benchCase.path when set (resolved compat mode)
}

func (c benchCase) label() string {
	return fmt.Sprintf("%s %s (%s memory, %d thread%s)", c.op, c.path, c.memory, c.threads, plural(c.threads))
}

// plan lists the cases of one run in table order.
func (b *bench) plan() []benchCase {
	var cases []benchCase
	for _, op := range b.ops() {
		if !b.o.noBase {
			cases = append(cases, b.storageCeiling(op))
			if b.mem.device {
				cases = append(cases, b.pcieCeiling(op))
			}
			cases = append(cases, b.naive(op))
		}
		for _, t := range b.threadList() {
			cases = append(cases, b.kvikHost(op, t))
			if b.mem.device {
				cases = append(cases, b.kvikDevice(op, t)...)
			}
		}
	}
	return cases
}

// ops returns the operations to run.
func (b *bench) ops() []string {
	if b.o.op == "both" {
		return []string{"read", "write"}
	}
	return []string{b.o.op}
}

// threadList returns --threads, or 1 and kvik's default.
func (b *bench) threadList() []int {
	if len(b.o.threads) > 0 {
		return b.o.threads
	}
	d, _ := kvik.GetDefaults()
	if d.NumThreads == 1 {
		return []int{1}
	}
	return []int{1, d.NumThreads}
}

// runAll measures every case.
func (b *bench) runAll() error {
	cases := b.plan()
	b.report = b.newReport()
	b.prog = newProgress(b.e, "bench", int64(len(cases)*b.o.repeats), false)
	defer b.prog.finish()
	for _, c := range cases {
		if err := b.runCase(c); err != nil {
			return err
		}
	}
	if b.o.paired {
		b.report.note("--paired-ceiling: each row's ratio is to the storage ceiling timed before each of its repetitions")
	}
	b.report.finish()
	return nil
}

// pairedCeiling returns the storage ceiling to time before each repetition
// of c under --paired-ceiling, or nil.
func (b *bench) pairedCeiling(c benchCase) (*benchCase, trial, error) {
	if !b.o.paired || c.ceiling != "" {
		return nil, trial{}, nil
	}
	pc := b.storageCeiling(c.op)
	t, err := pc.open()
	return &pc, t, err
}

// runCase opens c, times its repetitions and records the result.
func (b *bench) runCase(c benchCase) error {
	t, err := c.open()
	if err != nil && c.optional {
		b.report.note("%s %s: skipped: %v", c.op, c.path, err)
		b.prog.add(int64(b.o.repeats), c.label())
		return nil
	}
	if t.path != "" {
		c.path = t.path
	}
	if err != nil {
		return fmt.Errorf("%s: %w", c.label(), err)
	}
	defer t.close()
	pc, pt, err := b.pairedCeiling(c)
	if err != nil {
		return fmt.Errorf("%s: paired ceiling: %w", c.label(), err)
	}
	if pc != nil {
		defer pt.close()
	}
	b.prog.add(0, c.label())
	warm := func() (float64, error) { return b.timeOnce(c, t) }
	if b.o.warmupAuto {
		n, err := steadyWarmup(warm, warmupMax, warmupTime)
		if err != nil {
			return fmt.Errorf("%s: warm-up: %w", c.label(), err)
		}
		b.report.warmedUp(n)
	}
	for range b.o.warmup {
		if _, err := warm(); err != nil {
			return fmt.Errorf("%s: warm-up: %w", c.label(), err)
		}
	}
	secs := make([]float64, 0, b.o.repeats)
	var paired []float64
	for i := range b.o.repeats {
		if pc != nil {
			s, err := b.timeOnce(*pc, pt)
			if err != nil {
				return fmt.Errorf("%s: paired ceiling: %w", c.label(), err)
			}
			paired = append(paired, s)
		}
		if err := b.beforeRun(c, i); err != nil {
			return fmt.Errorf("%s: %w", c.label(), err)
		}
		start := time.Now()
		if err := t.run(); err != nil {
			return fmt.Errorf("%s: %w", c.label(), err)
		}
		secs = append(secs, time.Since(start).Seconds())
		if i == 0 && t.verify != nil {
			if err := t.verify(); err != nil {
				return fmt.Errorf("%s: verification failed: %w", c.label(), err)
			}
		}
		b.prog.add(1, c.label())
	}
	b.report.add(c, b.size, secs, paired, t.verify != nil)
	return nil
}

// timeOnce prepares and times one repetition of c with trial t that is
// not verified (a warm-up, or the ceiling paired with a row): its setup
// is beforeRun's for a repetition after the first, so it clears nothing.
func (b *bench) timeOnce(c benchCase, t trial) (float64, error) {
	if err := b.beforeRun(c, 1); err != nil {
		return 0, err
	}
	start := time.Now()
	err := t.run()
	return time.Since(start).Seconds(), err
}

// beforeRun prepares repetition i, untimed: reads start from a cleared
// destination (the first, which is verified) and optionally a dropped page
// cache; writes start from an empty file, as with KvikIO's "w" open.
func (b *bench) beforeRun(c benchCase, i int) error {
	if c.op == "write" {
		return os.Truncate(b.path, 0)
	}
	if i == 0 {
		if err := b.clearDest(); err != nil {
			return err
		}
	}
	if b.o.cache.mode != "" {
		return b.setCache()
	}
	if b.o.dropCache {
		return b.dropCache()
	}
	return nil
}

// clearDest zeroes the read destinations so that a read that misses bytes
// cannot pass verification.
func (b *bench) clearDest() error {
	clear(b.dst)
	if b.dev != nil {
		return b.mem.gpu.clear(b.dev.Ptr(), b.dev.Size())
	}
	return nil
}

// dropCache drops the file's pages from the page cache, and notes once if
// the file system keeps them (tmpfs).
func (b *bench) dropCache() error {
	if err := kvik.DropFilePageCache(b.path, 0, 0); err != nil {
		return err
	}
	if !b.report.dropChecked {
		b.report.dropChecked = true
		if res, total, err := kvik.PageCacheInfo(b.path, 0, 0); err == nil && total > 0 && res*10 > total {
			b.report.note("the page cache could not be dropped (%d of %s stay resident): reads come from memory", res, count(total, "page"))
		}
	}
	return nil
}

// verifyHost checks that the host destination holds the file's bytes.
func (b *bench) verifyHost() error { return compareBytes(b.dst, b.ref) }

// verifyDevice copies the device buffer to the host and checks it.
func (b *bench) verifyDevice() error {
	clear(b.dst)
	if err := b.mem.gpu.dtoh(b.dst, b.dev.Ptr()); err != nil {
		return err
	}
	return compareBytes(b.dst, b.ref)
}

// verifyFile reads the file back after a write and checks it.
func (b *bench) verifyFile() error {
	f, err := os.Open(b.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() != b.size {
		return fmt.Errorf("%s: size %d after writing %d bytes", b.path, fi.Size(), b.size)
	}
	clear(b.dst)
	if _, err := f.ReadAt(b.dst, 0); err != nil {
		return fmt.Errorf("reading back %s: %w", b.path, err)
	}
	return compareBytes(b.dst, b.ref)
}

// compareBytes reports the first byte where got differs from want.
func compareBytes(got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("data mismatch at byte %d: got %#02x, want %#02x", i, got[i], want[i])
		}
	}
	return fmt.Errorf("data mismatch: %d bytes, want %d", len(got), len(want))
}

// verifier returns the check for op: reads into memory, writes to the file.
func (b *bench) verifier(op, memory string) func() error {
	switch {
	case op == "write":
		return b.verifyFile
	case memory == "device":
		return b.verifyDevice
	}
	return b.verifyHost
}

// storageCeiling measures 16 threads of O_DIRECT pread or pwrite over the
// file: what the storage delivers. Without O_DIRECT it uses buffered I/O
// and says so.
func (b *bench) storageCeiling(op string) benchCase {
	c := benchCase{op: op, path: "storage ceiling", memory: "host", threads: ceilingThreads, ceiling: "storage"}
	c.open = func() (trial, error) {
		flags := os.O_RDONLY
		if op == "write" {
			flags = os.O_WRONLY
		}
		fd, err := unix.Open(b.path, flags|unix.O_CLOEXEC, 0)
		if err != nil {
			return trial{}, &os.PathError{Op: "open", Path: b.path, Err: err}
		}
		t := trial{verify: b.verifier(op, "host")}
		dfd, derr := unix.Open(b.path, flags|unix.O_DIRECT|unix.O_CLOEXEC, 0)
		if derr != nil {
			dfd, t.path = fd, "storage ceiling (buffered)"
			b.report.note("O_DIRECT refused by the file system (%v): the storage ceiling uses buffered I/O", derr)
		}
		buf := b.dst
		if op == "write" {
			buf = b.ref
		}
		t.run = func() error { return ceilingIO(dfd, fd, op == "write", buf, b.size) }
		t.close = func() {
			if dfd != fd {
				unix.Close(dfd)
			}
			unix.Close(fd)
		}
		return t, nil
	}
	return c
}

// ceilingChunk is the size of each pread or pwrite of the storage ceiling.
const ceilingChunk = 4 * miB

// ceilingIO transfers [0, size) between the file and buf with
// ceilingThreads goroutines, through dfd (O_DIRECT) for page-aligned
// pieces and fd for an unaligned tail; writes end with fdatasync. buf
// must be page-aligned with its capacity a whole number of pages.
func ceilingIO(dfd, fd int, write bool, buf []byte, size int64) error {
	ps := int64(os.Getpagesize())
	end := size
	if write {
		end = size / ps * ps // O_DIRECT writes whole blocks; the tail goes buffered
	}
	var next atomic.Int64
	errs := make([]error, ceilingThreads)
	var wg sync.WaitGroup
	for i := range ceilingThreads {
		wg.Go(func() {
			for errs[i] == nil {
				off := next.Add(ceilingChunk) - ceilingChunk
				if off >= end {
					return
				}
				stop := min(off+ceilingChunk, end)
				if write {
					errs[i] = pwriteFull(dfd, buf[off:stop], off)
				} else {
					errs[i] = preadAtLeast(dfd, buf[off:min((stop+ps-1)/ps*ps, int64(cap(buf)))], off, int(stop-off))
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil || !write {
		return err
	}
	if err := pwriteFull(fd, buf[end:size], end); err != nil {
		return err
	}
	return unix.Fdatasync(fd)
}

// preadAtLeast reads into b at off until at least n bytes arrived or the
// file ended.
func preadAtLeast(fd int, b []byte, off int64, n int) error {
	done := 0
	for done < n {
		m, err := unix.Pread(fd, b[done:], off+int64(done))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case m == 0:
			return io.ErrUnexpectedEOF
		}
		done += m
	}
	return nil
}

// pwriteFull writes all of b at off.
func pwriteFull(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		m, err := unix.Pwrite(fd, b, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b, off = b[m:], off+int64(m)
	}
	return nil
}

// naive measures the baseline: one thread of os.File I/O and, with device
// memory, one copy between a pageable host buffer and the GPU.
func (b *bench) naive(op string) benchCase {
	c := benchCase{op: op, path: "naive os.File", memory: "host", threads: 1}
	if b.mem.device {
		c.memory, c.path = "device", "naive os.File+copy"
	}
	c.open = func() (trial, error) {
		flags := os.O_RDONLY
		if op == "write" {
			flags = os.O_WRONLY
		}
		f, err := os.OpenFile(b.path, flags, 0)
		if err != nil {
			return trial{}, err
		}
		t := trial{verify: b.verifier(op, c.memory), close: func() { f.Close() }}
		if op == "read" {
			t.run = func() error { return b.naiveRead(f) }
			return t, nil
		}
		t.run = func() error { return b.naiveWrite(f) }
		return t, b.upload()
	}
	return c
}

// naiveRead reads the file from its start into dst, then copies it to the
// device if there is one.
func (b *bench) naiveRead(f *os.File) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.ReadFull(f, b.dst); err != nil {
		return err
	}
	if b.dev != nil {
		return b.mem.gpu.htod(b.dev.Ptr(), b.dst)
	}
	return nil
}

// naiveWrite copies the device buffer to the host if there is one, then
// writes the file from its start and syncs it.
func (b *bench) naiveWrite(f *os.File) error {
	src := b.ref
	if b.dev != nil {
		src = b.dst
		if err := b.mem.gpu.dtoh(src, b.dev.Ptr()); err != nil {
			return err
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := f.Write(src); err != nil {
		return err
	}
	return f.Sync()
}

// upload puts the file's contents in the device buffer, as the source of
// device writes.
func (b *bench) upload() error {
	if b.dev == nil {
		return nil
	}
	return b.mem.gpu.htod(b.dev.Ptr(), b.ref)
}

// pcieChunk is the size of the pinned buffer of the PCIe ceiling.
const pcieChunk = 256 * miB

// pcieCeiling measures copies between pinned host memory and the device
// buffer: the most a transfer through host memory can reach.
func (b *bench) pcieCeiling(op string) benchCase {
	c := benchCase{op: op, path: "pcie ceiling", memory: "device", threads: 1, ceiling: "pcie"}
	c.open = func() (trial, error) {
		g := b.mem.gpu
		var pinned *cuda.HostBuffer
		err := g.do(func() (err error) {
			pinned, err = cuda.MemHostAlloc(int(min(b.size, pcieChunk)), 0)
			return err
		})
		if err != nil {
			return trial{}, fmt.Errorf("allocating pinned memory: %w", err)
		}
		copy(pinned.Bytes(), b.ref)
		run := func() error {
			return g.do(func() error { return pcieCopy(op == "write", pinned.Bytes(), b.dev.Ptr(), b.size) })
		}
		return trial{run: run, close: func() { pinned.Close() }}, nil
	}
	return c
}

// pcieCopy copies size bytes between the device at dev and the pinned
// buffer, a buffer's length at a time; the context must be current.
func pcieCopy(toHost bool, pinned []byte, dev cuda.DevicePtr, size int64) error {
	for off := int64(0); off < size; off += int64(len(pinned)) {
		p := pinned[:min(int64(len(pinned)), size-off)]
		var err error
		if toHost {
			err = cuda.MemcpyDtoH(p, dev+cuda.DevicePtr(off))
		} else {
			err = cuda.MemcpyHtoD(dev+cuda.DevicePtr(off), p)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// withSettings applies the thread count and the --task-size,
// --bounce-size and --direct flags to kvik's defaults; the returned
// function restores them.
func (b *bench) withSettings(threads int) (func(), error) {
	o := b.o
	return kvik.UpdateDefaults(func(d *kvik.Defaults) {
		d.NumThreads = threads
		if o.taskSize.set {
			d.TaskSize = int(o.taskSize.n)
		}
		if o.bounce.set {
			d.BounceBufferSize = int(o.bounce.n)
		}
		if o.direct.set {
			d.AutoDirectIORead, d.AutoDirectIOWrite = o.direct.v, o.direct.v
			d.DirectIOReadPolicy = kvik.ReadPolicyBuffered
			if o.direct.v {
				d.DirectIOReadPolicy = kvik.ReadPolicyDirect
			}
		}
	})
}

// openKvik applies the settings for threads and opens the file with kvik;
// closing the returned handle's trial restores the settings.
func (b *bench) openKvik(op string, threads int, opts ...kvik.Option) (*kvik.FileHandle, func(), error) {
	restore, err := b.withSettings(threads)
	if err != nil {
		return nil, nil, err
	}
	flags := "r"
	if op == "write" {
		flags = "r+"
	}
	f, err := kvik.Open(b.path, flags, 0, opts...)
	if err != nil {
		restore()
		return nil, nil, err
	}
	return f, func() { f.Close(); restore() }, nil
}

// kvikHost measures kvik's host-memory path: ReadAt or WriteAt of the
// whole file with threads workers.
func (b *bench) kvikHost(op string, threads int) benchCase {
	c := benchCase{op: op, path: "kvik host", memory: "host", threads: threads}
	c.open = func() (trial, error) {
		f, closeFn, err := b.openKvik(op, threads)
		if err != nil {
			return trial{}, err
		}
		t := trial{verify: b.verifier(op, "host"), close: closeFn}
		t.run = func() error { return b.full(f.ReadAt(b.dst, 0)) }
		if op == "write" {
			t.run = func() error { return syncAfter(f, b.full(f.WriteAt(b.ref, 0))) }
		}
		return t, nil
	}
	return c
}

// kvikDevice returns the device-memory cases for threads workers: POSIX
// with bounce buffers and cuFile (or the one --compat names), and cuFile
// with a registered buffer under --register.
func (b *bench) kvikDevice(op string, threads int) []benchCase {
	var cases []benchCase
	add := func(path string, mode kvik.CompatMode, optional, register bool) {
		c := benchCase{op: op, path: path, memory: "device", threads: threads, optional: optional}
		c.open = func() (trial, error) { return b.openDevice(op, threads, mode, register) }
		cases = append(cases, c)
	}
	switch b.o.compat {
	case "":
		add("kvik posix+bounce", kvik.CompatOn, false, false)
		add("kvik cufile", kvik.CompatOff, true, false)
	default:
		mode, _ := kvik.ParseCompatMode(b.o.compat)
		add(compatPath(mode), mode, false, false)
	}
	if b.o.register && b.o.compat != "on" {
		add("kvik cufile+reg", kvik.CompatOff, true, true)
	}
	return cases
}

// compatPath names the device path of a compat mode.
func compatPath(m kvik.CompatMode) string {
	switch m {
	case kvik.CompatOn:
		return "kvik posix+bounce"
	case kvik.CompatOff:
		return "kvik cufile"
	}
	return "kvik auto"
}

// openDevice opens the file with kvik in compat mode mode and returns the
// trial of ReadDevice or WriteDevice of the whole device buffer.
func (b *bench) openDevice(op string, threads int, mode kvik.CompatMode, register bool) (trial, error) {
	f, closeFn, err := b.openKvik(op, threads, kvik.WithCompatMode(mode))
	if err != nil {
		return trial{}, err
	}
	t := trial{verify: b.verifier(op, "device"), close: closeFn, path: compatPath(f.CompatMode())}
	if register {
		t.path += "+reg"
		err = b.registerBuffer(&t)
	}
	if err == nil && op == "write" {
		err = b.upload()
	}
	if err != nil {
		t.close()
		return t, err
	}
	ptr, n := b.dev.Ptr(), int(b.size)
	t.run = func() error { return b.full(f.ReadDevice(ptr, n, 0, 0)) }
	if op == "write" {
		t.run = func() error { return syncAfter(f, b.full(f.WriteDevice(ptr, n, 0, 0))) }
	}
	return t, nil
}

// registerBuffer registers the device buffer with cuFile for the trial's
// lifetime.
func (b *bench) registerBuffer(t *trial) error {
	g, p := b.mem.gpu, b.dev.Ptr()
	if err := g.do(func() error { return cufile.BufRegister(p, b.dev.Size(), 0) }); err != nil {
		return fmt.Errorf("cuFileBufRegister: %w", err)
	}
	closeFn := t.close
	t.close = func() {
		g.do(func() error { return cufile.BufDeregister(p) })
		closeFn()
	}
	return nil
}

// full turns a transfer of other than the whole file into an error.
func (b *bench) full(n int, err error) error {
	if err == nil && int64(n) != b.size {
		return fmt.Errorf("transferred %d of %d bytes", n, b.size)
	}
	return err
}

// syncAfter syncs f after a successful write.
func syncAfter(f *kvik.FileHandle, err error) error {
	if err != nil {
		return err
	}
	return f.Sync()
}

// --warmup auto's bounds: repetitions and seconds of them per row.
const (
	warmupMax  = 64
	warmupTime = 5 * time.Second
)

// steadyWarmup runs run, an untimed repetition returning its seconds,
// until its last three times agree within 5% (the slowest at most 1.05
// times the fastest), or max runs, or runs adding up to limit, and
// returns how many it ran: a fresh process reads a small file slower
// for its first few dozen reads, and a median of a few timed ones after
// a fixed warm-up is still on that ramp.
func steadyWarmup(run func() (float64, error), max int, limit time.Duration) (int, error) {
	var last []float64
	total := 0.0
	for n := 1; ; n++ {
		s, err := run()
		if err != nil {
			return n, err
		}
		total += s
		last = append(last, s)
		if len(last) > 3 {
			last = last[1:]
		}
		if len(last) == 3 && slices.Max(last) <= 1.05*slices.Min(last) || n >= max || total >= limit.Seconds() {
			return n, nil
		}
	}
}
