// Package tensorload places the tensors of one file in memory and reads
// them there with kvik's parallel reads: one allocation per device (or one
// host allocation), each tensor at an aligned offset, tensors that are
// adjacent in the file read as one range. The format packages (safetensors,
// gguf) decide which tensors go where; this package lays them out and
// reads them.
package tensorload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/hostmem"
	"golang.org/x/sync/errgroup"
)

// Alignment is the alignment of every tensor's offset in its allocation
// (cudaMalloc's guarantee for a fresh allocation, so addresses too).
const Alignment = 256

// Balanced as a Tensor's Slot places it by size: each slot gets a
// contiguous share of the file of about the same number of bytes.
const Balanced = -1

// maxGap is the most file bytes between two tensors (a format's padding)
// that a run reads through, into memory it leaves unused, rather than
// starting another read: fewer, longer reads.
const maxGap = 4096

// Tensor is what the plan needs of one tensor.
type Tensor struct {
	Off, Size int64 // byte range in the file
	// Slot is the index of the device for a whole tensor, or Balanced.
	Slot int
	// SplitUnit, if positive and there are several slots, cuts the tensor
	// by byte range into one part per slot, at multiples of SplitUnit (a
	// multiple of Alignment that cuts no element).
	SplitUnit int64
}

// Piece is one contiguous byte range of a tensor in one slot: the whole
// tensor, or one part of a split one.
type Piece struct {
	Tensor  int   // index into the planned tensors
	Part    int   // index among the tensor's parts; -1 for a whole tensor
	Slot    int   // index of the device (0 for host memory)
	Off     int64 // file offset
	Size    int64
	PartOff int64 // offset of a part in its tensor
	MemOff  int64 // offset in the slot's allocation, a multiple of Alignment
}

// Run is a contiguous file range read into contiguous memory of one slot.
type Run struct {
	Slot                int
	FileOff, MemOff, Sz int64
}

// Plan is where every piece goes and which reads fill the allocations.
type Plan struct {
	Pieces []Piece // tensor by tensor, parts in order
	Runs   []Run
	Totals []int64 // bytes of each slot's allocation
}

// New places ts in nslot slots (at least 1) and merges into runs the
// pieces that follow each other in the file and in memory.
func New(ts []Tensor, nslot int) *Plan {
	nslot = max(nslot, 1)
	var total int64
	for _, t := range ts {
		total += t.Size
	}
	p := &Plan{}
	var cum int64
	for i, t := range ts {
		switch {
		case t.SplitUnit > 0 && nslot > 1:
			share := alignUp((t.Size+int64(nslot)-1)/int64(nslot), t.SplitUnit)
			for s, at := 0, int64(0); s < nslot && at < t.Size; s, at = s+1, at+share {
				n := min(share, t.Size-at)
				p.Pieces = append(p.Pieces, Piece{Tensor: i, Part: s, Slot: s, Off: t.Off + at, Size: n, PartOff: at})
			}
		default:
			slot := t.Slot
			if slot == Balanced {
				slot = balancedSlot(cum, t.Size, total, nslot)
			}
			p.Pieces = append(p.Pieces, Piece{Tensor: i, Part: -1, Slot: slot, Off: t.Off, Size: t.Size})
		}
		cum += t.Size
	}
	p.layout(nslot)
	return p
}

// balancedSlot is the slot of a Balanced tensor of size bytes with cum
// bytes of tensors before it, of total, in nslot slots: contiguous
// balanced shares keep each device's reads long.
func balancedSlot(cum, size, total int64, nslot int) int {
	if nslot <= 1 || total <= 0 {
		return 0
	}
	return int(min((cum+size/2)*int64(nslot)/total, int64(nslot-1)))
}

// BalancedSlots returns the slot that New gives each of a file's tensors,
// of the sizes given in order, when every one is Balanced and none is
// split: what a process loading onto one of nslot devices alone would
// load to match one process loading onto all of them (kvik bench's
// process-per-GPU reference).
func BalancedSlots(sizes []int64, nslot int) []int {
	var total, cum int64
	for _, n := range sizes {
		total += n
	}
	slots := make([]int, len(sizes))
	for i, n := range sizes {
		slots[i] = balancedSlot(cum, n, total, nslot)
		cum += n
	}
	return slots
}

// layout gives each piece an aligned offset in its slot, and extends the
// slot's open run over it when the piece follows the run in the file
// (after at most maxGap bytes of padding) and that keeps it aligned.
func (p *Plan) layout(nslot int) {
	p.Totals = make([]int64, nslot)
	last := make([]int, nslot) // index+1 of each slot's open run
	for i := range p.Pieces {
		pc := &p.Pieces[i]
		if pc.Size == 0 {
			continue // an empty tensor points at its slot's (aligned) base
		}
		cur := p.Totals[pc.Slot]
		if r := last[pc.Slot]; r > 0 {
			run := &p.Runs[r-1]
			gap := pc.Off - (run.FileOff + run.Sz)
			if gap >= 0 && gap <= maxGap && run.MemOff+run.Sz == cur && (cur+gap)%Alignment == 0 {
				pc.MemOff = cur + gap
				run.Sz += gap + pc.Size
				p.Totals[pc.Slot] = pc.MemOff + pc.Size
				continue
			}
		}
		pc.MemOff = alignUp(cur, Alignment)
		p.Runs = append(p.Runs, Run{Slot: pc.Slot, FileOff: pc.Off, MemOff: pc.MemOff, Sz: pc.Size})
		last[pc.Slot] = len(p.Runs)
		p.Totals[pc.Slot] = pc.MemOff + pc.Size
	}
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// ReadHost reads a one-slot plan into one host allocation aligned to
// Alignment, and returns it: piece i's bytes are at mem[Pieces[i].MemOff:].
// Cancelling ctx abandons the reads; the allocation is then dropped.
func (p *Plan) ReadHost(ctx context.Context, r kvik.Reader) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	total := p.Totals[0]
	// Sizes come from the file and the server: refuse what the machine
	// cannot hold instead of dying in the allocation.
	if err := hostmem.Check(total+Alignment, "tensors"); err != nil {
		return nil, err
	}
	raw := make([]byte, total+Alignment)
	pad := int64((Alignment - uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%Alignment) % Alignment)
	mem := raw[pad : pad+total : pad+total]
	err := readRuns(ctx, p.Runs, func(ctx context.Context, run Run) (*kvik.Future, error) {
		return r.PRead(ctx, mem[run.MemOff:run.MemOff+run.Sz], run.FileOff), nil
	}, nil)
	if err != nil {
		return nil, err
	}
	return mem, nil
}

// Memory is the device memory of a loaded plan: one allocation per slot.
type Memory struct {
	// Bases are the slots' base addresses (0 for a slot with no bytes).
	Bases []cuda.DevicePtr
	bufs  []*cuda.DeviceBuffer // by slot; nil where a slot has no bytes
	devs  []*retained          // by slot; nil where retaining failed
}

// Close frees the allocations and releases the primary contexts that
// ReadDevices retained, on every device at once (eachSlot).
func (m *Memory) Close() error {
	errs := make([]error, len(m.devs))
	eachSlot(len(m.devs), func(s int) {
		var e []error
		if s < len(m.bufs) && m.bufs[s] != nil {
			e = append(e, m.bufs[s].Close())
		}
		if m.devs[s] != nil {
			e = append(e, m.devs[s].release())
		}
		errs[s] = errors.Join(e...)
	})
	m.bufs, m.devs = nil, nil
	return errors.Join(errs...)
}

// ReadDevices allocates each slot's bytes on the device of that index in
// devices and reads every run into it. The devices are allocated one
// after the other (Alloc), and a slot's reads start as soon as its
// allocation is made, while the next device allocates. On error, a
// cancelled ctx included, it waits for the reads it started and frees
// what it allocated.
func (p *Plan) ReadDevices(ctx context.Context, r kvik.Reader, devices []int) (*Memory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := cuda.Init(); err != nil {
		return nil, err
	}
	logCtx := ctx
	m := newMemory(len(devices))
	// Slot s's allocation error is in allocErr[s] once allocated[s] is closed.
	allocated := make([]chan struct{}, len(devices))
	allocErr := make([]error, len(devices))
	for s := range allocated {
		allocated[s] = make(chan struct{})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tl := newTimeline(len(devices))
	var allocs sync.WaitGroup
	allocs.Go(func() {
		var err error // once set, every later slot gets it, unallocated
		for s, ord := range devices {
			if err == nil {
				err = ctx.Err()
			}
			if err == nil {
				err = m.allocSlot(s, ord, p.Totals[s])
			}
			tl.mark(tl.alloc, s)
			allocErr[s] = err
			close(allocated[s])
		}
	})
	err := readRuns(ctx, p.Runs, func(ctx context.Context, run Run) (*kvik.Future, error) {
		<-allocated[run.Slot]
		if err := allocErr[run.Slot]; err != nil {
			return nil, err
		}
		return r.PReadDevice(ctx, m.Bases[run.Slot], int(run.Sz), run.FileOff, run.MemOff), nil
	}, func(run Run) error {
		tl.mark(tl.read, run.Slot)
		return nil
	})
	cancel()
	allocs.Wait()
	if err != nil {
		m.Close()
		return nil, err
	}
	tl.log(logCtx, devices, p.Totals)
	return m, nil
}

// timeline records when each slot of a load was allocated and when its
// last run was in (0 for a slot with nothing to read), for a record at
// LevelDebug: where a load on several devices spends its time (one
// device waiting for another's allocation, or finishing after the
// others).
type timeline struct {
	start       time.Time
	alloc, read []atomic.Int64 // nanoseconds since start; read: the latest run's
}

func newTimeline(n int) *timeline {
	return &timeline{start: time.Now(), alloc: make([]atomic.Int64, n), read: make([]atomic.Int64, n)}
}

// mark records now in at[s], keeping the latest.
func (t *timeline) mark(at []atomic.Int64, s int) {
	now := int64(time.Since(t.start))
	for {
		old := at[s].Load()
		if now <= old || at[s].CompareAndSwap(old, now) {
			return
		}
	}
}

func (t *timeline) log(ctx context.Context, devices []int, totals []int64) {
	l := kvik.Logger()
	if !l.Enabled(ctx, kvik.LevelDebug) {
		return
	}
	attrs := []slog.Attr{slog.Duration("elapsed", time.Since(t.start))}
	for s, ord := range devices {
		attrs = append(attrs, slog.Group(fmt.Sprintf("device%d", ord),
			slog.Int64("bytes", totals[s]),
			slog.Duration("allocated", time.Duration(t.alloc[s].Load())),
			slog.Duration("read", time.Duration(t.read[s].Load()))))
	}
	l.LogAttrs(ctx, kvik.LevelDebug, "kvik: tensors read to devices", attrs...)
}

// Alloc allocates totals[s] bytes on device devices[s] for every slot s,
// as a load does before its reads (benchmarks time it alone); Close
// frees it.
func Alloc(devices []int, totals []int64) (*Memory, error) {
	m := newMemory(len(devices))
	if err := m.alloc(devices, totals); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

func newMemory(n int) *Memory {
	return &Memory{Bases: make([]cuda.DevicePtr, n), bufs: make([]*cuda.DeviceBuffer, n), devs: make([]*retained, n)}
}

// retained is a device whose primary context a Memory holds.
type retained struct {
	dev cuda.Device
	ctx cuda.Context
}

func (r *retained) release() error { return r.dev.PrimaryCtxRelease() }

// alloc retains every device's primary context and allocates its slot,
// one device after the other: cuMemAlloc on several devices at once took
// longer than the same calls in turn (2x H200: 4 GB on each of two GPUs at
// once 3.5-4.0 ms, 8 GB on one 1.9-2.4 ms; bench/probes/alloc_probe.c
// likewise, 3.5 ms against 2 x 0.95 ms).
func (m *Memory) alloc(devices []int, totals []int64) error {
	for s, ord := range devices {
		if err := m.allocSlot(s, ord, totals[s]); err != nil {
			return err
		}
	}
	return nil
}

// allocSlot retains device ord's primary context and allocates slot s's
// size bytes there.
func (m *Memory) allocSlot(s, ord int, size int64) error {
	dev, err := cuda.DeviceGet(ord)
	if err != nil {
		return err
	}
	ctx, err := dev.PrimaryCtxRetain()
	if err != nil {
		return err
	}
	m.devs[s] = &retained{dev, ctx}
	if size == 0 {
		return nil
	}
	var b *cuda.DeviceBuffer
	if err := cuda.WithContext(ctx, func() (err error) { b, err = cuda.MemAlloc(int(size)); return err }); err != nil {
		return fmt.Errorf("allocating %d bytes on device %d: %w", size, ord, err)
	}
	m.bufs[s] = b
	m.Bases[s] = b.Ptr()
	return nil
}

// eachSlot runs f for slots 0..n-1, each on its own goroutine when there
// are several, and waits for them all.
func eachSlot(n int, f func(s int)) {
	if n == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	for s := range n {
		wg.Go(func() { f(s) })
	}
	wg.Wait()
}

// readRuns starts every run's read (start may block until it can, or
// fail) and waits for all it started, so none is left running, calling
// done (if not nil) on each run's goroutine once that run is in. The
// first run to fail (or come up short, or fail to start, or fail in
// done), whichever its position, cancels those still running and starts
// no more: a failed load neither waits for nor pays for the rest of the
// file. It reports that first failure, not the cancellations it caused,
// or parent's error when parent was cancelled.
func readRuns(parent context.Context, runs []Run, start func(context.Context, Run) (*kvik.Future, error), done func(Run) error) error {
	g, ctx := errgroup.WithContext(parent)
	for _, run := range runs {
		if ctx.Err() != nil {
			break
		}
		fu, err := start(ctx, run)
		if err != nil {
			g.Go(func() error { return err })
			break
		}
		g.Go(func() error {
			n, err := fu.Get()
			if err == nil && int64(n) != run.Sz {
				err = io.ErrUnexpectedEOF
			}
			if err == nil && done != nil {
				err = done(run)
			}
			return err
		})
	}
	err := g.Wait()
	if err != nil && parent.Err() != nil {
		return parent.Err()
	}
	return err
}

// Options selects and places the tensors that a format's Load reads; T
// is the format's description of a tensor (its TensorInfo). The zero
// value loads every tensor onto device 0. safetensors and gguf export it
// as their Options.
type Options[T any] struct {
	// Names, if set, are the only tensors loaded; a missing one is an
	// error matching the format's ErrNotFound.
	Names []string
	// Filter, if set, loads only the tensors it returns true for.
	Filter func(t *T) bool
	// Devices are the CUDA device ordinals to load onto (default [0]).
	Devices []int
	// Place maps a tensor to an index into Devices. When nil and there are
	// several devices, tensors are balanced by size: each device gets a
	// contiguous share of about the same number of bytes.
	Place func(t *T) int
	// Split, if set, selects tensors that are cut by byte range into one
	// part per device (at multiples of Alignment that cut no element of
	// the tensor's type) instead of being placed whole. Their Parts field
	// lists the pieces.
	Split func(t *T) bool
	// Replicate loads every selected tensor onto every device in Devices
	// (data-parallel serving): each byte is read from storage once, by
	// one device, and copied device to device to the others (over NVLink
	// where the GPUs have it). Each Tensor's Replicas lists the copies;
	// Device and Ptr are the first. Place and Split must be nil.
	Replicate bool
	// Filter, Place and Split may be called from several goroutines at
	// once (safetensors.LoadIndex loads its shards concurrently): they
	// must be safe for concurrent use, as pure functions of their
	// argument are.
}

// Request is one load of a file's tensors, described by T (a format's
// tensor description): which to load, where, and how to read them.
type Request[T any] struct {
	// Tensors are every tensor of the file, in file order.
	Tensors []T
	// Name returns a tensor's name; Range its byte range in the file;
	// Unit the granularity at which a split cuts it (a multiple of
	// Alignment that cuts no element).
	Name  func(*T) string
	Range func(*T) (off, size int64)
	Unit  func(*T) int64
	// Options are the format's.
	Options[T]
	// Host loads into host memory, ignoring placement.
	Host bool
	// NotFound and InvalidArgument are the format's errors for a missing
	// name and a Place out of range.
	NotFound, InvalidArgument error
	// Key, if set, names the bytes a tensor is (torch's tied weights:
	// one view of one storage under two names): the selected tensors of
	// one non-empty key are placed and read once, as the first of them,
	// and share its memory.
	Key func(*T) string
}

// Part is the piece of a split tensor held by one device: bytes
// [Offset, Offset+Size) of the tensor at Ptr.
type Part struct {
	Device       int
	Ptr          cuda.DevicePtr
	Offset, Size int64
}

// Placement is where one loaded tensor is.
type Placement struct {
	// Device is the CUDA ordinal holding the tensor, or -1 for host memory
	// or a split tensor.
	Device int
	// Ptr is the tensor's device address (aligned to Alignment) for a
	// whole tensor on a device; 0 otherwise.
	Ptr cuda.DevicePtr
	// Data is the tensor's bytes for a host load; nil otherwise.
	Data []byte
	// Parts lists the pieces of a split tensor, in order.
	Parts []Part
	// Replicas lists every device's copy of the tensor for a load with
	// Options.Replicate, in the order of Options.Devices; nil otherwise.
	Replicas []Replica
}

// Replica is one device's copy of a tensor loaded with Options.Replicate.
type Replica struct {
	Device int
	Ptr    cuda.DevicePtr
}

// Result is a load's selected tensors (in file order), where each is,
// and the device memory holding them (nil for a host load).
type Result[T any] struct {
	Tensors []T
	Placed  []Placement
	Mem     *Memory
}

// Load selects, places and reads the tensors of q from r: one allocation
// per device (or one host allocation) and one parallel read per run.
// Selection and placement are checked before anything is allocated.
// Cancelling ctx stops the reads; Load then frees what it allocated and
// returns ctx.Err().
func Load[T any](ctx context.Context, r kvik.Reader, q *Request[T]) (*Result[T], error) {
	ts, err := q.selected()
	if err != nil {
		return nil, err
	}
	uniq, of := q.unique(ts)
	res, err := q.load(ctx, r, uniq)
	if err != nil || len(uniq) == len(ts) {
		return res, err
	}
	placed := make([]Placement, len(ts))
	for i, k := range of {
		placed[i] = res.Placed[k]
	}
	res.Tensors, res.Placed = ts, placed
	return res, nil
}

// unique returns the tensors of ts with a key (Key) no tensor before
// them has, and for each of ts the index of its own among them.
func (q *Request[T]) unique(ts []T) ([]T, []int) {
	of := make([]int, len(ts))
	if q.Key == nil {
		for i := range of {
			of[i] = i
		}
		return ts, of
	}
	first := map[string]int{}
	var uniq []T
	for i := range ts {
		k := q.Key(&ts[i])
		j, ok := first[k]
		if !ok || k == "" {
			j = len(uniq)
			uniq = append(uniq, ts[i])
			if k != "" {
				first[k] = j
			}
		}
		of[i] = j
	}
	return uniq, of
}

// load places and reads ts, the selected tensors.
func (q *Request[T]) load(ctx context.Context, r kvik.Reader, ts []T) (*Result[T], error) {
	devices := q.Devices
	if len(devices) == 0 || q.Host {
		devices = []int{0}
	}
	replicate := q.Replicate && !q.Host
	if replicate && (q.Place != nil || q.Split != nil) {
		return nil, fmt.Errorf("%w: Replicate places every tensor on every device; Place and Split must be nil", q.InvalidArgument)
	}
	slots := len(devices)
	if replicate {
		slots = 1
	}
	specs, err := q.specs(ts, slots)
	if err != nil {
		return nil, err
	}
	p := New(specs, slots)
	res := &Result[T]{Tensors: ts, Placed: make([]Placement, len(ts))}
	for i := range res.Placed {
		res.Placed[i].Device = -1
	}
	if q.Host {
		mem, err := p.ReadHost(ctx, r)
		if err != nil {
			return nil, err
		}
		for _, pc := range p.Pieces {
			res.Placed[pc.Tensor].Data = mem[pc.MemOff : pc.MemOff+pc.Size : pc.MemOff+pc.Size]
		}
		return res, nil
	}
	if replicate {
		if res.Mem, err = p.ReadReplicas(ctx, r, devices); err != nil {
			return nil, err
		}
		for _, pc := range p.Pieces {
			l := &res.Placed[pc.Tensor]
			for k, base := range res.Mem.Bases {
				l.Replicas = append(l.Replicas, Replica{Device: devices[k], Ptr: base + cuda.DevicePtr(pc.MemOff)})
			}
			l.Device, l.Ptr = l.Replicas[0].Device, l.Replicas[0].Ptr
		}
		return res, nil
	}
	if res.Mem, err = p.ReadDevices(ctx, r, devices); err != nil {
		return nil, err
	}
	for _, pc := range p.Pieces {
		l := &res.Placed[pc.Tensor]
		ptr := res.Mem.Bases[pc.Slot] + cuda.DevicePtr(pc.MemOff)
		if pc.Part < 0 {
			l.Device, l.Ptr = devices[pc.Slot], ptr
		} else {
			l.Parts = append(l.Parts, Part{Device: devices[pc.Slot], Ptr: ptr, Offset: pc.PartOff, Size: pc.Size})
		}
	}
	return res, nil
}

// selected returns the tensors that Names and Filter select, in file order.
func (q *Request[T]) selected() ([]T, error) {
	return Select(q.Tensors, q.Name, q.Names, q.Filter, q.NotFound)
}

// Select returns the tensors of ts (named by name) that names lists,
// every one when it is empty, and filter (when not nil) keeps, in the
// order of ts; a name ts lacks is notFound: a format's Options.Names
// and Filter, for a caller that reads the tensors itself.
func Select[T any](ts []T, name func(*T) string, names []string, filter func(*T) bool, notFound error) ([]T, error) {
	var want map[string]bool
	if len(names) > 0 {
		have := make(map[string]bool, len(ts))
		for i := range ts {
			have[name(&ts[i])] = true
		}
		want = make(map[string]bool, len(names))
		for _, n := range names {
			if !have[n] {
				return nil, fmt.Errorf("%w: %q", notFound, n)
			}
			want[n] = true
		}
	}
	var out []T
	for i := range ts {
		t := &ts[i]
		if (want != nil && !want[name(t)]) || (filter != nil && !filter(t)) {
			continue
		}
		out = append(out, *t)
	}
	return out, nil
}

// specs places each tensor: whole in slot 0 for a host load, split, by
// Place, or balanced.
func (q *Request[T]) specs(ts []T, ndev int) ([]Tensor, error) {
	specs := make([]Tensor, len(ts))
	for i := range ts {
		t := &ts[i]
		s := Tensor{Slot: Balanced}
		s.Off, s.Size = q.Range(t)
		switch {
		case q.Host:
			s.Slot = 0
		case q.Split != nil && q.Split(t) && ndev > 1:
			s.SplitUnit = q.Unit(t)
		case q.Place != nil:
			s.Slot = q.Place(t)
			if s.Slot < 0 || s.Slot >= ndev {
				return nil, fmt.Errorf("%w: Place put %q on device index %d of %d", q.InvalidArgument, q.Name(t), s.Slot, ndev)
			}
		}
		specs[i] = s
	}
	return specs, nil
}

// Open opens name, a local path or a URL (see kvik.OpenReader), with opts
// and ctx, calls f on it and closes it: a format's Load by name around its
// load from an open kvik.Reader.
func Open[M any](ctx context.Context, name string, opts []kvik.RemoteOption, f func(kvik.Reader) (M, error)) (M, error) {
	if err := ctx.Err(); err != nil {
		var zero M
		return zero, err
	}
	r, err := kvik.OpenReader(ctx, name, opts...)
	if err != nil {
		var zero M
		return zero, kvik.RedactError(err)
	}
	defer r.Close()
	m, err := f(r)
	return m, kvik.RedactError(err)
}

// ReaderAt returns r as an io.ReaderAt whose reads are cancelled with
// ctx, for a format's header reads: each ReadAt is r.PRead with ctx.
func ReaderAt(ctx context.Context, r kvik.Reader) io.ReaderAt { return ctxReader{ctx, r} }

type ctxReader struct {
	ctx context.Context
	r   kvik.Reader
}

func (c ctxReader) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.PRead(c.ctx, p, off).Get()
	if err != nil && c.ctx.Err() != nil {
		err = c.ctx.Err()
	}
	return n, err
}

// Whole runs load, which reads the file r reads (a header, then the
// data it describes), and fails it with an error wrapping
// kvik.ErrFileChanged, closing what load returned, when that file was
// written to meanwhile (kvik.WatchFile): its parts may then disagree.
func Whole[M io.Closer](r kvik.Reader, load func() (M, error)) (M, error) {
	check := kvik.WatchFile(r)
	m, err := load()
	if err != nil {
		return m, err
	}
	if err := check(); err != nil {
		m.Close()
		var none M
		return none, err
	}
	return m, nil
}

// WholeHeader is a format's load from r as one Whole: its header read
// by header, then what that describes loaded by load; an error names
// r's file (PathError).
func WholeHeader[H any, M io.Closer](r kvik.Reader, header func() (H, error), load func(H) (M, error)) (M, error) {
	m, err := Whole(r, func() (M, error) {
		h, err := header()
		if err != nil {
			var none M
			return none, err
		}
		return load(h)
	})
	if err != nil {
		var none M
		return none, PathError(r, err)
	}
	return m, nil
}

// PathError names r's file in err, unless a kvik handle already did. A
// remote file's name is its URL without the query, so a signature stays
// out of errors.
func PathError(r kvik.Reader, err error) error {
	if _, ok := err.(*fs.PathError); ok {
		return err
	}
	return &fs.PathError{Op: "read", Path: r.Name(), Err: err}
}

// Find returns the element of ts at byName[name]: a format's
// Header.Lookup and Model.Tensor.
func Find[T any](ts []T, byName map[string]int, name string) (*T, bool) {
	i, ok := byName[name]
	if !ok {
		return nil, false
	}
	return &ts[i], true
}
