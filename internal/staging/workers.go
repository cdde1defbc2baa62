package staging

import (
	"runtime"
	"sync"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/sched"
)

// workerKey names a worker pool: a block device ("" for the shared pool)
// and the CUDA context whose device memory the pool's tasks copy to or
// from (0 for host operations).
//
// Each GPU has pools of its own because a pool runs its tasks in
// submission order: with one pool for every GPU, a load that starts GPU
// 0's reads before GPU 1's (safetensors.Load balanced over two GPUs, or
// two ReadFileToDevice calls from two goroutines) kept every worker on
// GPU 0's link until its share was done, then on GPU 1's, so a second GPU
// added nothing (2x H100: 1.01x one GPU, against 1.83x for two processes;
// docs/performance.md). With a pool per GPU each link is fed at once, as
// one process per GPU would feed it.
type workerKey struct {
	dev string
	gpu cuda.Context
}

// Workers holds the worker pools of a process, made on first use, and
// counts the contexts with device operations in flight, which sets the
// limit of each GPU's pools (DeviceLimit). The zero value is ready.
type Workers struct {
	// Place, if set, binds the threads of each GPU's pools to the GPU's
	// NUMA node (Placer.Thread).
	Place *Placer

	mu      sync.Mutex
	pools   map[workerKey]*sched.Pool
	threads int                  // the last thread count asked for
	ops     map[cuda.Context]int // device operations in flight
}

// Host returns the pool for host operations on block device dev ("" for
// the shared pool), with threads workers.
func (w *Workers) Host(dev string, threads int) *sched.Pool {
	return w.pool(workerKey{dev: dev}, threads)
}

// Device returns the pool for operations that copy to or from device
// memory in ctx, on block device dev.
func (w *Workers) Device(dev string, ctx cuda.Context, threads int) *sched.Pool {
	return w.pool(workerKey{dev: dev, gpu: ctx}, threads)
}

func (w *Workers) pool(k workerKey, threads int) *sched.Pool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.threads = threads
	p := w.pools[k]
	if p == nil {
		if w.pools == nil {
			w.pools = map[workerKey]*sched.Pool{}
		}
		p = sched.NewPool(w.limitLocked(k))
		if k.gpu != 0 && w.Place != nil {
			p.Thread = w.Place.Thread(k.gpu)
		}
		w.pools[k] = p
	}
	return p
}

// Resize sets every pool's limit for threads workers per device.
func (w *Workers) Resize(threads int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.threads = threads
	w.resizeLocked()
}

func (w *Workers) resizeLocked() {
	for k, p := range w.pools {
		p.SetLimit(w.limitLocked(k))
	}
}

// limitLocked is the worker limit of pool k: the thread count for host
// operations, and for a GPU's operations DeviceLimit's share.
func (w *Workers) limitLocked(k workerKey) int {
	if k.gpu == 0 {
		return w.threads
	}
	return DeviceLimit(w.threads, len(w.ops), runtime.NumCPU())
}

// DeviceLimit is the worker limit of each GPU's pool while operations on
// ndev GPUs are in flight: threads per GPU, as ndev processes would
// have, but together no more than the machine's CPUs, and together never
// fewer than threads (so each GPU gets at least its even share of them).
// A process feeding one GPU keeps threads workers.
func DeviceLimit(threads, ndev, cpus int) int {
	if ndev <= 1 {
		return threads
	}
	total := max(threads, min(threads*ndev, cpus))
	return (total + ndev - 1) / ndev
}

// Active returns how many contexts have device operations in flight.
func (w *Workers) Active() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ops)
}

// Enter marks a device operation in ctx as started and returns the
// function that marks it done. When the number of contexts in use
// changes above one, the pools are resized (DeviceLimit); between none
// and one the limit stays the thread count, so an operation on a single
// GPU does not touch the pools.
func (w *Workers) Enter(ctx cuda.Context) (leave func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ops == nil {
		w.ops = map[cuda.Context]int{}
	}
	w.ops[ctx]++
	if w.ops[ctx] == 1 && len(w.ops) > 1 {
		w.resizeLocked()
	}
	return sync.OnceFunc(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.ops[ctx]--; w.ops[ctx] == 0 {
			delete(w.ops, ctx)
			if len(w.ops) > 0 {
				w.resizeLocked()
			}
		}
	})
}
