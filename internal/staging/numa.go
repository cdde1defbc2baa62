package staging

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/numa"
)

// Placer puts each GPU's staging on the GPU's NUMA node: the threads of
// its worker pools on the node's CPUs (Thread) and its bounce buffers in
// the node's memory (Pool.Node, Pool.Bind). On a host of two sockets a
// staged read crosses host memory three times (the page cache read, the
// bounce buffer written, then read by the GPU's DMA); with the buffer and
// the thread on the GPU's socket, none of those crossings goes over the
// link between sockets. It does nothing on a host where fewer than two
// nodes have CPUs the process may use (numa.NewPolicy), while disabled,
// or for a GPU whose node sysfs does not give. The zero value reads
// /sys and is enabled.
type Placer struct {
	// Root is the sysfs root; "" is /sys.
	Root string
	// OnChoice, if set, is told once per GPU what was chosen: the GPU's
	// PCI address, its node and CPUs, whether it is placed, and why not
	// when it is not (for log records).
	OnChoice func(busID string, c numa.Choice, placed bool, err error)

	off atomic.Bool

	once   sync.Once
	policy *numa.Policy
	err    error // reading the layout

	mu    sync.Mutex
	byDev map[cuda.Device]placement
	byCtx map[cuda.Context]placement

	// devOf and busOf, if set, stand in for the driver in tests: the
	// device of a context (0: the current one), a device's PCI address.
	devOf func(cuda.Context) (cuda.Device, error)
	busOf func(cuda.Device) (string, error)
}

// device returns the device of ctx, or of the current context for 0.
func (p *Placer) device(ctx cuda.Context) (d cuda.Device, err error) {
	switch {
	case p.devOf != nil:
		return p.devOf(ctx)
	case ctx == 0:
		return cuda.CtxGetDevice()
	}
	err = cuda.WithContext(ctx, func() (err error) { d, err = cuda.CtxGetDevice(); return err })
	return d, err
}

// busID returns d's PCI address.
func (p *Placer) busID(d cuda.Device) (string, error) {
	if p.busOf != nil {
		return p.busOf(d)
	}
	return d.PCIBusID()
}

// placement is the choice for one GPU; ok false: leave it be.
type placement struct {
	c  numa.Choice
	ok bool
}

// SetEnabled turns placement on (the default) or off for what starts
// after: worker threads that start, and bounce buffers allocated.
func (p *Placer) SetEnabled(on bool) { p.off.Store(!on) }

// Enabled reports whether placement is on (it may still have nothing to
// place).
func (p *Placer) Enabled() bool { return !p.off.Load() }

// Err returns why the host's layout could not be read, if it could not.
func (p *Placer) Err() error {
	p.active()
	return p.err
}

// active reports whether placement is on and the host has somewhere to
// place: the layout is read once, for the CPUs of the thread that first
// asks, before any thread is bound.
func (p *Placer) active() bool {
	if p.off.Load() {
		return false
	}
	p.once.Do(func() {
		var allowed unix.CPUSet
		if p.err = unix.SchedGetaffinity(0, &allowed); p.err != nil {
			return
		}
		root := p.Root
		if root == "" {
			root = "/sys"
		}
		p.policy, p.err = numa.NewPolicy(numa.Sysfs(root), allowed)
	})
	return p.policy != nil
}

// forDevice returns the placement of device d, looked up once.
func (p *Placer) forDevice(d cuda.Device) placement {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pl, ok := p.byDev[d]; ok {
		return pl
	}
	var pl placement
	bus, err := p.busID(d)
	if err == nil {
		pl.c, pl.ok, err = p.policy.ForDevice(bus)
	}
	if p.OnChoice != nil {
		p.OnChoice(bus, pl.c, pl.ok, err)
	}
	if p.byDev == nil {
		p.byDev = map[cuda.Device]placement{}
	}
	p.byDev[d] = pl
	return pl
}

// forContext returns the placement of ctx's device.
func (p *Placer) forContext(ctx cuda.Context) placement {
	p.mu.Lock()
	pl, ok := p.byCtx[ctx]
	p.mu.Unlock()
	if ok {
		return pl
	}
	d, err := p.device(ctx)
	if err != nil {
		return placement{}
	}
	pl = p.forDevice(d)
	p.mu.Lock()
	if p.byCtx == nil {
		p.byCtx = map[cuda.Context]placement{}
	}
	p.byCtx[ctx] = pl
	p.mu.Unlock()
	return pl
}

// Thread returns the sched.Pool Thread hook of the pools of ctx's
// device: each worker's thread bound to the CPUs of the device's node
// for the worker's life, then given its old mask back.
func (p *Placer) Thread(ctx cuda.Context) func() (release func()) {
	return func() func() {
		if !p.active() {
			return nil
		}
		pl := p.forContext(ctx)
		if !pl.ok {
			return nil
		}
		restore, err := numa.BindThread(pl.c.CPUs)
		if err != nil {
			return nil // the scheduler's placement, as without NUMA
		}
		return restore
	}
}

// CurrentNode is a pinning Pool's Node: the node of the device of the
// current CUDA context, or -1 (none, or placement off).
func (p *Placer) CurrentNode() int {
	if !p.active() {
		return -1
	}
	d, err := p.device(0)
	if err != nil {
		return -1
	}
	if pl := p.forDevice(d); pl.ok {
		return pl.c.Node
	}
	return -1
}

// Bind is a Pool's Bind: mem, not yet touched, goes in node's memory, by
// mbind where the kernel allows it, else touched first from threads on
// the node's CPUs. Where neither works, mem stays where the kernel puts
// it.
func (p *Placer) Bind(mem []byte, node int) {
	if numa.BindMemory(mem, node) == nil {
		return
	}
	if cpus := p.policy.NodeCPUs(node); cpus.Count() > 0 {
		numa.FirstTouch(mem, cpus)
	}
}
