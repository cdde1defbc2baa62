package tensorload

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// TestShares checks the cut of a replicated load: the pieces cover the
// runs' bytes once, in order, none longer than the chunk or crossing a
// run; share k is slot k and holds the bytes between the k-th and
// (k+1)-th n-th of the total.
func TestShares(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for range 300 {
		ts, _ := randomTensors(rng, int64(rng.IntN(9000)))
		p := New(ts, 1)
		n := 1 + rng.IntN(5)
		chunk := int64(1 + rng.IntN(3000))
		pieces := shares(p.Runs, n, chunk)
		var total int64
		for _, r := range p.Runs {
			total += r.Sz
		}
		perSlot := make([]int64, n)
		ri, at := 0, int64(0) // the run and the offset in it the next piece must start at
		for i, pc := range pieces {
			for ri < len(p.Runs) && at == p.Runs[ri].Sz {
				ri, at = ri+1, 0
			}
			if ri == len(p.Runs) {
				t.Fatalf("piece %d %+v beyond the runs", i, pc)
			}
			r := p.Runs[ri]
			if pc.FileOff != r.FileOff+at || pc.MemOff != r.MemOff+at || pc.Sz <= 0 || pc.Sz > chunk || at+pc.Sz > r.Sz {
				t.Fatalf("piece %d %+v: want start at %d of run %+v, at most %d bytes", i, pc, at, r, chunk)
			}
			if i > 0 && pc.Slot < pieces[i-1].Slot || pc.Slot >= n {
				t.Fatalf("piece %d in slot %d after slot %d (%d slots)", i, pc.Slot, pieces[i-1].Slot, n)
			}
			at += pc.Sz
			perSlot[pc.Slot] += pc.Sz
		}
		var cum int64
		for k, got := range perSlot {
			want := (int64(k)+1)*total/int64(n) - int64(k)*total/int64(n)
			if got != want {
				t.Fatalf("%d slots, %d bytes: share %d has %d bytes, want %d (all: %v)", n, total, k, got, want, perSlot)
			}
			cum += got
		}
		if cum != total {
			t.Fatalf("pieces hold %d of %d bytes", cum, total)
		}
	}
}

// TestReadReplicas reads a random file onto every GPU (device 0 twice on
// a machine of one, so the fan-out runs anywhere there is a GPU) and
// checks every device's copy of every piece.
func TestReadReplicas(t *testing.T) {
	n := gputest.Need(t)
	ts, data, f := randomFile(t, rand.New(rand.NewPCG(43, 44)), 12)
	devices := []int{0, 0}
	if n > 1 {
		devices = devices[:0]
		for i := range min(n, 4) {
			devices = append(devices, i)
		}
	}
	p := New(ts, 1)
	m, err := p.ReadReplicas(context.Background(), f, devices)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(m.Bases) != len(devices) {
		t.Fatalf("%d bases for %d devices", len(m.Bases), len(devices))
	}
	for k, base := range m.Bases {
		for _, pc := range p.Pieces {
			got := gputest.FromDevice(t, devices[k], base+cuda.DevicePtr(pc.MemOff), pc.Size)
			if !bytes.Equal(got, data[pc.Off:pc.Off+pc.Size]) {
				t.Fatalf("piece %+v differs in copy %d (device %d)", pc, k, devices[k])
			}
		}
	}
}
