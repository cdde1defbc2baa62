package tensorload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
	"github.com/kvikgo/kvik/internal/testkit/httpfault"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// randomTensors lays out up to 80 tensors of random sizes from file
// offset base, with random padding (0 to 63 bytes, sometimes more than
// maxGap) between them, and returns them with the end of the last.
func randomTensors(rng *rand.Rand, base int64) ([]Tensor, int64) {
	var ts []Tensor
	at := base
	for range 1 + rng.IntN(80) {
		sz := int64(rng.IntN(5000))
		if rng.IntN(2) == 0 {
			sz = sz / 256 * 256
		}
		ts = append(ts, Tensor{Off: at, Size: sz, Slot: Balanced})
		at += sz
		switch rng.IntN(4) {
		case 0:
			at += int64(rng.IntN(64))
		case 1:
			at += maxGap + 1
		}
	}
	return ts, at
}

// TestPlanLayout checks placement: balanced shares are contiguous and
// near equal, split tensors cover their bytes, every memory offset is
// aligned, no two pieces share memory, and every run is one contiguous
// file range holding its pieces at the matching memory offsets.
func TestPlanLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := range 80 {
		ts, _ := randomTensors(rng, int64(rng.IntN(100)))
		var sum, maxT int64
		for i := range ts {
			sum += ts[i].Size
			maxT = max(maxT, ts[i].Size)
			if trial%3 == 0 && ts[i].Size > 3000 {
				ts[i].SplitUnit = Alignment * int64(1+rng.IntN(3))
			}
		}
		nslot := 1 + rng.IntN(4)
		p := New(ts, nslot)
		covered := make([]int64, nslot)
		for i, pc := range p.Pieces {
			if pc.MemOff%Alignment != 0 || pc.MemOff+pc.Size > p.Totals[pc.Slot] || pc.Slot < 0 || pc.Slot >= nslot {
				t.Fatalf("piece %+v misplaced (totals %v)", pc, p.Totals)
			}
			for _, q := range p.Pieces[:i] {
				if q.Slot == pc.Slot && q.Size > 0 && pc.Size > 0 && q.MemOff < pc.MemOff+pc.Size && pc.MemOff < q.MemOff+q.Size {
					t.Fatalf("pieces %+v and %+v share memory", q, pc)
				}
			}
			covered[pc.Slot] += pc.Size
		}
		var inRuns int64
		for _, r := range p.Runs {
			var held int64
			for _, pc := range p.Pieces {
				if pc.Slot == r.Slot && pc.Size > 0 && pc.Off >= r.FileOff && pc.Off+pc.Size <= r.FileOff+r.Sz {
					if pc.MemOff-r.MemOff != pc.Off-r.FileOff {
						t.Fatalf("piece %+v not where run %+v puts it", pc, r)
					}
					held += pc.Size
				}
			}
			if r.Sz-held > maxGap*int64(len(p.Pieces)) || held == 0 {
				t.Fatalf("run %+v holds %d bytes of pieces", r, held)
			}
			inRuns += held
		}
		if inRuns != sum {
			t.Fatalf("runs hold %d bytes of %d", inRuns, sum)
		}
		for i := range ts {
			var s int64
			nparts := 0
			for _, pc := range p.Pieces {
				if pc.Tensor == i {
					if pc.PartOff != s || (pc.Part >= 0 && pc.PartOff%ts[i].SplitUnit != 0) {
						t.Fatalf("parts of %d not contiguous or cut off a unit: %+v", i, pc)
					}
					s += pc.Size
					nparts++
				}
			}
			if s != ts[i].Size || (ts[i].SplitUnit == 0 && nparts != 1) || nparts > nslot {
				t.Fatalf("tensor %d: %d pieces cover %d of %d", i, nparts, s, ts[i].Size)
			}
		}
		if trial%3 != 0 && nslot > 1 {
			for _, c := range covered {
				if d := c - sum/int64(nslot); d > maxT || -d > maxT {
					t.Fatalf("unbalanced: %v of %d (largest tensor %d)", covered, sum, maxT)
				}
			}
		}
	}
}

// TestGapMerge checks padding between tensors is read through when that
// keeps the next tensor aligned, and starts a new run when it would not.
func TestGapMerge(t *testing.T) {
	p := New([]Tensor{{Off: 100, Size: 224}, {Off: 356, Size: 512}, {Off: 868, Size: 10}, {Off: 900, Size: 7}}, 1)
	// 100..324 then 32 bytes of padding: 356-100 = 256 keeps the second
	// aligned; the third follows directly at memory 768 (aligned); the
	// fourth would land at 800, not aligned: a new run.
	if len(p.Runs) != 2 || p.Runs[0] != (Run{FileOff: 100, MemOff: 0, Sz: 778}) || p.Pieces[3].MemOff != 1024 {
		t.Fatalf("runs %+v pieces %+v", p.Runs, p.Pieces)
	}
}

// randomFile writes random tensors from file offset base into a file of
// random bytes, and returns them, the bytes and the open file.
func randomFile(t *testing.T, rng *rand.Rand, base int64) ([]Tensor, []byte, *kvik.FileHandle) {
	ts, end := randomTensors(rng, base)
	data := make([]byte, end)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return ts, data, f
}

// TestReadHost reads random plans of a real file through a FileHandle and
// compares every piece with the file's bytes.
func TestReadHost(t *testing.T) {
	ts, data, f := randomFile(t, rand.New(rand.NewPCG(3, 4)), 37)
	end := int64(len(data))
	p := New(ts, 1)
	mem, err := p.ReadHost(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if len(mem) > 0 && uintptr(unsafe.Pointer(&mem[0]))%Alignment != 0 {
		t.Fatal("host memory not aligned")
	}
	for _, pc := range p.Pieces {
		if !bytes.Equal(mem[pc.MemOff:pc.MemOff+pc.Size], data[pc.Off:pc.Off+pc.Size]) {
			t.Fatalf("piece %+v differs", pc)
		}
	}
	// A run past the end of the file is a short read, reported.
	short := New([]Tensor{{Off: end - 10, Size: 20}}, 1)
	if _, err := short.ReadHost(context.Background(), f); err == nil {
		t.Fatal("read past the end succeeded")
	}
}

// TestReadDevices reads a plan split over every GPU (up to 4) and
// compares each piece with the file. Skips without a GPU.
func TestReadDevices(t *testing.T) {
	n := gputest.Need(t)
	ts, data, f := randomFile(t, rand.New(rand.NewPCG(5, 6)), 11)
	ts[len(ts)/2].SplitUnit = Alignment
	devices := make([]int, min(n, 4))
	for i := range devices {
		devices[i] = i
	}
	p := New(ts, len(devices))
	var rec recorder
	restore := kvik.SetLogger(slog.New(&rec))
	m, err := p.ReadDevices(context.Background(), f, devices)
	restore()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// The debug record says when each device was allocated and read.
	var timelines []slog.Record
	for _, r := range rec.records {
		if r.Message == "kvik: tensors read to devices" {
			timelines = append(timelines, r)
		}
	}
	if len(timelines) != 1 {
		t.Fatalf("%d timeline records among %d, want one", len(timelines), len(rec.records))
	}
	groups := map[string]map[string]slog.Value{}
	timelines[0].Attrs(func(a slog.Attr) bool {
		if a.Value.Kind() == slog.KindGroup {
			g := map[string]slog.Value{}
			for _, b := range a.Value.Group() {
				g[b.Key] = b.Value
			}
			groups[a.Key] = g
		}
		return true
	})
	for s, ord := range devices {
		g := groups[fmt.Sprintf("device%d", ord)]
		// A slot with no bytes has no run: nothing read, read stays 0.
		readOK := g != nil && g["read"].Duration() >= g["allocated"].Duration()
		if p.Totals[s] == 0 {
			readOK = g != nil && g["read"].Duration() == 0
		}
		if g == nil || g["bytes"].Int64() != p.Totals[s] || g["allocated"].Duration() <= 0 || !readOK {
			t.Fatalf("device %d: timeline %v (bytes %d)", ord, g, p.Totals[s])
		}
	}
	for _, pc := range p.Pieces {
		got := gputest.FromDevice(t, devices[pc.Slot], m.Bases[pc.Slot]+cuda.DevicePtr(pc.MemOff), pc.Size)
		if !bytes.Equal(got, data[pc.Off:pc.Off+pc.Size]) {
			t.Fatalf("piece %+v differs on device %d", pc, devices[pc.Slot])
		}
	}
}

// recorder is a slog handler that keeps every record.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// TestFailedRunCancelsOthers reads eight runs on two workers from an
// HTTP server that refuses the second run's GET (403) and holds the
// others until their request is cancelled: the read fails with the
// refusal without waiting for the held run, so a failed load of any
// format stops paying for the rest of the file. Without the cancellation
// the first run's GET is held until the bound below fails the test.
func TestFailedRunCancelsOthers(t *testing.T) {
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.NumThreads = 2 })
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	rng := rand.New(rand.NewPCG(9, 10))
	data := make([]byte, 8*2*maxGap)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	var ts []Tensor
	for i := range 8 { // 2*maxGap apart: one run each
		ts = append(ts, Tensor{Off: int64(i) * 2 * maxGap, Size: 1000})
	}
	refused := fmt.Sprintf("bytes=%d-", ts[1].Off)
	release := make(chan struct{})
	srv := httpfault.New(t, map[string][]byte{"/f": data}, func(_ int32, w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if strings.HasPrefix(r.Header.Get("Range"), refused) {
			http.Error(w, "no", http.StatusForbidden)
			return true
		}
		select {
		case <-r.Context().Done():
			return true
		case <-release:
			return false
		}
	})
	// The size given: no opening GET, whose first bytes would hold the
	// whole file; every run is a request of its own.
	r, err := kvik.OpenReader(context.Background(), srv.URL+"/f", kvik.WithRemoteSize(int64(len(data))))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer close(release) // before r.Close, which waits for the reads
	p := New(ts, 1)
	if len(p.Runs) != len(ts) {
		t.Fatalf("%d runs, want %d", len(p.Runs), len(ts))
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.ReadHost(context.Background(), r)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("read: %v, want the 403", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a failed run left the others running")
	}
}

// TestStartFailureStopsRuns fails the start of one run (as ReadDevices
// does when a device's allocation fails): readRuns reports that error,
// starts no later run, and returns only after the runs it started are
// done.
func TestStartFailureStopsRuns(t *testing.T) {
	ts, _, f := randomFile(t, rand.New(rand.NewPCG(11, 12)), 5)
	p := New(ts, 1)
	if len(p.Runs) < 3 {
		t.Fatalf("%d runs; the test needs 3", len(p.Runs))
	}
	failAt := len(p.Runs) / 2
	errAlloc := errors.New("allocation refused")
	mem := make([]byte, p.Totals[0])
	var started []*kvik.Future
	err := readRuns(context.Background(), p.Runs, func(ctx context.Context, run Run) (*kvik.Future, error) {
		if len(started) == failAt {
			started = append(started, nil)
			return nil, errAlloc
		}
		fu := f.PRead(ctx, mem[run.MemOff:run.MemOff+run.Sz], run.FileOff)
		started = append(started, fu)
		return fu, nil
	}, nil)
	if !errors.Is(err, errAlloc) {
		t.Fatalf("readRuns: %v, want %v", err, errAlloc)
	}
	if len(started) != failAt+1 {
		t.Fatalf("start called for %d runs, want %d (none after the failure)", len(started), failAt+1)
	}
	for i, fu := range started[:failAt] {
		if !fu.Done() {
			t.Fatalf("run %d still running after readRuns returned", i)
		}
	}
}

// TestBalancedSlots checks that BalancedSlots gives each tensor the slot
// New puts it in when all are Balanced: a process loading only the
// tensors of one slot loads what the balanced load puts on that device.
func TestBalancedSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 8))
	for range 300 {
		ts, _ := randomTensors(rng, int64(rng.IntN(1000)))
		nslot := 1 + rng.IntN(8)
		sizes := make([]int64, len(ts))
		for i := range ts {
			sizes[i] = ts[i].Size
		}
		got := BalancedSlots(sizes, nslot)
		p := New(ts, nslot)
		for _, pc := range p.Pieces {
			if got[pc.Tensor] != pc.Slot {
				t.Fatalf("%d slots, tensor %d of %d (%d bytes): BalancedSlots says slot %d, New placed it in %d",
					nslot, pc.Tensor, len(ts), ts[pc.Tensor].Size, got[pc.Tensor], pc.Slot)
			}
		}
		for i := 1; i < len(got); i++ {
			if got[i] < got[i-1] || got[i] >= nslot {
				t.Fatalf("slots %v: not contiguous shares in %d slots", got, nslot)
			}
		}
	}
}

// TestKey loads a file's tensors with every third one under the key of
// the one before it (tied weights): into host memory, and onto a GPU
// where there is one, each tensor's bytes are the file's and the tied
// ones share their first's memory, less than untied tensors take.
func TestKey(t *testing.T) {
	ts, data, f := randomFile(t, rand.New(rand.NewPCG(13, 14)), 11)
	type desc struct {
		name   string
		off, n int64
		key    string
	}
	var ds []desc
	for i, x := range ts {
		d := desc{fmt.Sprint("t", i), x.Off, x.Size, fmt.Sprint("k", i)}
		if i%3 == 2 {
			prev := ds[i-1]
			d.off, d.n, d.key = prev.off, prev.n, prev.key
		}
		ds = append(ds, d)
	}
	// What the tensors would take each in memory of its own.
	var all []Tensor
	for _, d := range ds {
		all = append(all, Tensor{Off: d.off, Size: d.n, Slot: 0})
	}
	untied := New(all, 1).Totals[0]
	for _, host := range []bool{true, false} {
		if !host && gputest.Count() == 0 {
			continue
		}
		res, err := Load(context.Background(), f, &Request[desc]{
			Tensors: ds, Host: host,
			Name:     func(d *desc) string { return d.name },
			Range:    func(d *desc) (int64, int64) { return d.off, d.n },
			Unit:     func(*desc) int64 { return Alignment },
			Key:      func(d *desc) string { return d.key },
			NotFound: errors.New("not found"), InvalidArgument: errors.New("invalid"),
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tensors) != len(ds) {
			t.Fatalf("%d tensors, want %d", len(res.Tensors), len(ds))
		}
		for i, d := range ds {
			pl := res.Placed[i]
			got := pl.Data
			if !host {
				got = gputest.FromDevice(t, pl.Device, pl.Ptr, d.n)
			}
			if res.Tensors[i].name != d.name || !bytes.Equal(got, data[d.off:d.off+d.n]) {
				t.Fatalf("host %v: tensor %d (%s) differs", host, i, d.name)
			}
			if i%3 == 2 && d.n > 0 && (pl.Ptr != res.Placed[i-1].Ptr || (host && &pl.Data[0] != &res.Placed[i-1].Data[0])) {
				t.Errorf("host %v: tensor %d is not in its tie's memory", host, i)
			}
		}
		if !host {
			if got := int64(res.Mem.bufs[0].Size()); got >= untied {
				t.Errorf("%d bytes on the device, %d untied", got, untied)
			}
			res.Mem.Close()
		}
	}
}
