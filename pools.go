package kvik

import (
	"runtime"
	"sync"

	"github.com/kvikgo/kvik/cuda"

	"github.com/kvikgo/kvik/internal/sched"
)

// poolKey names a worker pool: the block device of the file (with
// ThreadPoolPerBlockDevice, else "") and the CUDA context whose device
// memory the pool's tasks copy to or from (0 for host operations).
//
// Each GPU has pools of its own because a pool runs its tasks in
// submission order: with one pool for every GPU, a load that starts GPU
// 0's reads before GPU 1's (safetensors.Load balanced over two GPUs, or
// two ReadFileToDevice calls from two goroutines) kept every worker on
// GPU 0's link until its share was done, then on GPU 1's, so a second GPU
// added nothing (2x H100: 1.01x one GPU, against 1.83x for two processes;
// docs/performance.md). With a pool per GPU each link is fed at once, as
// one process per GPU would feed it.
type poolKey struct {
	dev string
	gpu cuda.Context
}

// pools holds the worker pools, made on first use.
var pools struct {
	mu sync.Mutex
	m  map[poolKey]*sched.Pool
}

// poolFor returns the pool for host operations on a file on the block
// device with key devKey ("" for the shared pool).
func poolFor(d Defaults, devKey string) *sched.Pool {
	return poolOf(d, poolKey{dev: devKey})
}

// devicePoolFor returns the pool for operations that copy to or from
// device memory in ctx.
func devicePoolFor(d Defaults, devKey string, ctx cuda.Context) *sched.Pool {
	return poolOf(d, poolKey{dev: devKey, gpu: ctx})
}

func poolOf(d Defaults, k poolKey) *sched.Pool {
	if !d.ThreadPoolPerBlockDevice {
		k.dev = ""
	}
	pools.mu.Lock()
	defer pools.mu.Unlock()
	p := pools.m[k]
	if p == nil {
		if pools.m == nil {
			pools.m = map[poolKey]*sched.Pool{}
		}
		p = sched.NewPool(limitOf(k, d.NumThreads, activeDevices(), runtime.NumCPU()))
		pools.m[k] = p
	}
	return p
}

// resizePools sets every pool's worker limit for n threads per device
// (limitOf).
func resizePools(n int) {
	ndev, cpus := activeDevices(), runtime.NumCPU()
	pools.mu.Lock()
	defer pools.mu.Unlock()
	for k, p := range pools.m {
		p.SetLimit(limitOf(k, n, ndev, cpus))
	}
}

// limitOf is the worker limit of pool k: NumThreads for host operations,
// and for a GPU's operations deviceLimit's share.
func limitOf(k poolKey, threads, ndev, cpus int) int {
	if k.gpu == 0 {
		return threads
	}
	return deviceLimit(threads, ndev, cpus)
}

// deviceLimit is the worker limit of each GPU's pool while operations on
// ndev GPUs are in flight: NumThreads per GPU, as ndev processes would
// have, but together no more than the machine's CPUs, and together never
// fewer than NumThreads (so each GPU gets at least its even share of
// them). A process feeding one GPU keeps NumThreads workers.
func deviceLimit(threads, ndev, cpus int) int {
	if ndev <= 1 {
		return threads
	}
	total := max(threads, min(threads*ndev, cpus))
	return (total + ndev - 1) / ndev
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
// changes above one, the pools are resized (deviceLimit); between none
// and one the limit stays NumThreads, so an operation on a single GPU
// does not touch the pools.
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
