package zarr

import (
	"testing"

	"github.com/kvikgo/kvik"
)

func TestDefaultMaxRequestsFollowsKvikIOCap(t *testing.T) {
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.NumThreads, d.RemoteMaxRequests = 16, 3 })
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	if n := DefaultMaxRequests(); n != 3 {
		t.Fatalf("DefaultMaxRequests = %d under a process cap of 3, want 3", n)
	}
	restore2, _ := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.RemoteMaxRequests = 0 })
	defer restore2()
	if n := DefaultMaxRequests(); n != MinRemoteRequests {
		t.Fatalf("DefaultMaxRequests = %d without a cap for 16 workers, want %d", n, MinRemoteRequests)
	}
	restore3, _ := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.NumThreads = 100 })
	defer restore3()
	if n := DefaultMaxRequests(); n != 100 {
		t.Fatalf("DefaultMaxRequests = %d without a cap, want the 100 workers", n)
	}
}

// TestFetchersBoundedByBytes: a read keeps every request slot busy while
// the slots' cells fit in fetchAhead, never fewer requests than workers.
func TestFetchersBoundedByBytes(t *testing.T) {
	for _, c := range []struct {
		chunk          []int // float32
		workers, slots int
		want           int
	}{
		{[]int{512, 512}, 12, 32, 32},       // 1 MiB cells: every slot
		{[]int{512, 512}, 12, 8, 8},         // fewer slots than workers
		{[]int{4096, 4096}, 12, 32, 12},     // 64 MiB cells: 4 fit, the workers' 12 kept
		{[]int{4096, 1024}, 2, 32, 16},      // 16 MiB cells: 16 fit
		{[]int{1 << 14, 1 << 14}, 1, 32, 1}, // 1 GiB cells
	} {
		a := &Array{workers: c.workers, meta: &Metadata{ChunkShape: c.chunk, DataType: DataType{Kind: Float, Size: 4}}, pipe: &pipeline{}}
		if got := a.fetchers(c.slots); got != c.want {
			t.Errorf("chunks %v, %d workers, %d slots: %d requests, want %d", c.chunk, c.workers, c.slots, got, c.want)
		}
	}
}
