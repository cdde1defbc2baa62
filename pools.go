package kvik

import (
	"sync"

	"github.com/kvikgo/kvik/internal/sched"
)

// pools holds the worker pools: one shared pool, and with
// ThreadPoolPerBlockDevice one per block device (keyed by the whole disk).
var pools struct {
	mu     sync.Mutex
	shared *sched.Pool
	perDev map[string]*sched.Pool
}

// poolFor returns the pool for a file on the block device with key devKey.
func poolFor(d Defaults, devKey string) *sched.Pool {
	pools.mu.Lock()
	defer pools.mu.Unlock()
	if !d.ThreadPoolPerBlockDevice || devKey == "" {
		if pools.shared == nil {
			pools.shared = sched.NewPool(d.NumThreads)
		}
		return pools.shared
	}
	p := pools.perDev[devKey]
	if p == nil {
		if pools.perDev == nil {
			pools.perDev = map[string]*sched.Pool{}
		}
		p = sched.NewPool(d.NumThreads)
		pools.perDev[devKey] = p
	}
	return p
}

// resizePools sets every pool's worker limit to n.
func resizePools(n int) {
	pools.mu.Lock()
	defer pools.mu.Unlock()
	if pools.shared != nil {
		pools.shared.SetLimit(n)
	}
	for _, p := range pools.perDev {
		p.SetLimit(n)
	}
}
