package kvik

import (
	"runtime"
	"sync"

	"github.com/kvikgo/kvik/cuda"

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
	limit := poolLimit(d.NumThreads, activeDevices(), runtime.NumCPU())
	if !d.ThreadPoolPerBlockDevice || devKey == "" {
		if pools.shared == nil {
			pools.shared = sched.NewPool(limit)
		}
		return pools.shared
	}
	p := pools.perDev[devKey]
	if p == nil {
		if pools.perDev == nil {
			pools.perDev = map[string]*sched.Pool{}
		}
		p = sched.NewPool(limit)
		pools.perDev[devKey] = p
	}
	return p
}

// resizePools sets every pool's worker limit for n threads per device
// (poolLimit).
func resizePools(n int) {
	pools.mu.Lock()
	defer pools.mu.Unlock()
	limit := poolLimit(n, activeDevices(), runtime.NumCPU())
	if pools.shared != nil {
		pools.shared.SetLimit(limit)
	}
	for _, p := range pools.perDev {
		p.SetLimit(limit)
	}
}

// poolLimit is the worker limit of a pool when operations on ndev GPUs
// are in flight: threads (NumThreads) per GPU, so that one process feeds
// N GPUs as N processes each with its own pool would, but no more than
// the machine's CPUs, and never fewer than threads. A process feeding
// one GPU keeps NumThreads workers.
func poolLimit(threads, ndev, cpus int) int {
	if ndev <= 1 {
		return threads
	}
	return max(threads, min(threads*ndev, cpus))
}

// gpus counts the device operations in flight per CUDA context.
var gpus struct {
	mu  sync.Mutex
	ops map[cuda.Context]int
}

// activeDevices returns how many contexts have device operations in
// flight.
func activeDevices() int {
	gpus.mu.Lock()
	defer gpus.mu.Unlock()
	return len(gpus.ops)
}

// enterDevice marks a device operation in ctx as started and returns the
// function that marks it done. When the number of contexts in use
// changes above one, the pools are resized (poolLimit); between none and
// one the limit stays NumThreads, so an operation on a single GPU does
// not touch the pools.
func enterDevice(ctx cuda.Context) (leave func()) {
	gpus.mu.Lock()
	if gpus.ops == nil {
		gpus.ops = map[cuda.Context]int{}
	}
	gpus.ops[ctx]++
	grew := gpus.ops[ctx] == 1 && len(gpus.ops) > 1
	gpus.mu.Unlock()
	if grew {
		resizeForDevices()
	}
	return sync.OnceFunc(func() {
		gpus.mu.Lock()
		gpus.ops[ctx]--
		shrank := false
		if gpus.ops[ctx] == 0 {
			delete(gpus.ops, ctx)
			shrank = len(gpus.ops) > 0
		}
		gpus.mu.Unlock()
		if shrank {
			resizeForDevices()
		}
	})
}

func resizeForDevices() {
	d, _ := GetDefaults()
	resizePools(d.NumThreads)
}
