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
	if n := DefaultMaxRequests(); n != 16 {
		t.Fatalf("DefaultMaxRequests = %d without a cap, want the 16 workers", n)
	}
}
