package staging

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/numa"
)

// twoNodePlacer returns a Placer over a fake sysfs of two nodes, each
// holding one of the CPUs this process may run on, with a GPU on each
// and one of unknown node; contexts 1, 2 and 3 are those GPUs' (the
// driver stands in for by a table). It skips where the process may run
// on fewer than two CPUs.
func twoNodePlacer(t *testing.T) (pl *Placer, cpus [2]int, setCurrent func(cuda.Context)) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Skip(err)
	}
	n := 0
	for c := 0; c < 1024 && n < 2; c++ {
		if allowed.IsSet(c) {
			cpus[n] = c
			n++
		}
	}
	if n < 2 {
		t.Skip("the process may run on one CPU")
	}
	root := t.TempDir()
	for rel, v := range map[string]string{
		"devices/system/node/online":             "0-1",
		"devices/system/node/node0/cpulist":      strconv.Itoa(cpus[0]),
		"devices/system/node/node1/cpulist":      strconv.Itoa(cpus[1]),
		"bus/pci/devices/0000:3b:00.0/numa_node": "0",
		"bus/pci/devices/0000:af:00.0/numa_node": "1",
		"bus/pci/devices/0000:d8:00.0/numa_node": "-1",
	} {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	buses := map[cuda.Device]string{1: "0000:3B:00.0", 2: "0000:AF:00.0", 3: "0000:D8:00.0"}
	var current atomic.Int64 // the "current context" of CurrentNode
	pl = &Placer{Root: root,
		devOf: func(c cuda.Context) (cuda.Device, error) {
			if c == 0 {
				c = cuda.Context(current.Load())
			}
			if _, ok := buses[cuda.Device(c)]; !ok {
				return 0, errors.New("no such context")
			}
			return cuda.Device(c), nil
		},
		busOf: func(d cuda.Device) (string, error) { return buses[d], nil },
	}
	return pl, cpus, func(c cuda.Context) { current.Store(int64(c)) }
}

func cpuOf(cpus ...int) unix.CPUSet {
	var s unix.CPUSet
	for _, c := range cpus {
		s.Set(c)
	}
	return s
}

// masks runs n tasks on pool p and returns the CPU masks of the threads
// they ran on.
func masks(p interface{ Submit(func()) }, n int) []unix.CPUSet {
	var mu sync.Mutex
	var out []unix.CPUSet
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		p.Submit(func() {
			defer wg.Done()
			var m unix.CPUSet
			unix.SchedGetaffinity(0, &m)
			mu.Lock()
			out = append(out, m)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// TestPlacerThreads checks that each GPU's pool runs its tasks on
// threads bound to the GPU's node, a GPU of unknown node's on threads as
// the scheduler has them, host pools unbound, and that SetEnabled(false)
// leaves new workers unbound; each GPU's choice is reported once.
func TestPlacerThreads(t *testing.T) {
	pl, cpus, _ := twoNodePlacer(t)
	var mu sync.Mutex
	chosen := map[string]int{}
	pl.OnChoice = func(bus string, c numa.Choice, placed bool, err error) {
		mu.Lock()
		chosen[bus]++
		mu.Unlock()
		if err != nil {
			t.Errorf("%s: %v", bus, err)
		}
	}
	var free unix.CPUSet
	unix.SchedGetaffinity(0, &free)
	w := Workers{Place: pl}
	for ctx, want := range map[cuda.Context]unix.CPUSet{1: cpuOf(cpus[0]), 2: cpuOf(cpus[1]), 3: free} {
		for i, m := range masks(w.Device("", ctx, 4), 40) {
			if m != want {
				t.Fatalf("context %d, task %d: thread mask %s, want %s", ctx, i, numa.FormatCPUs(m), numa.FormatCPUs(want))
			}
		}
	}
	for _, m := range masks(w.Host("", 4), 20) {
		if m != free {
			t.Fatalf("a host pool's thread has mask %s", numa.FormatCPUs(m))
		}
	}
	pl.SetEnabled(false)
	for _, m := range masks(w.Device("", 1, 4), 20) {
		if m != free {
			t.Fatalf("placement off: thread mask %s", numa.FormatCPUs(m))
		}
	}
	if len(chosen) != 3 || chosen["0000:3B:00.0"] != 1 || chosen["0000:AF:00.0"] != 1 || chosen["0000:D8:00.0"] != 1 {
		t.Errorf("choices reported %v, want each GPU once", chosen)
	}
}

// resident reports how many pages of mem are in memory (mincore).
func resident(t *testing.T, mem []byte) int {
	vec := make([]byte, (len(mem)+PageSize-1)/PageSize)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestPoolNodes checks a pool that keeps each node's buffers apart: a
// buffer comes back to its node's pool whichever pool it is put to and
// is handed out again only on its node; each slab is placed on its
// node before any of its pages is touched; Mapped and Drop cover every
// node.
func TestPoolNodes(t *testing.T) {
	pl, _, currentCtx := twoNodePlacer(t)
	type bound struct {
		node, size, resident int
	}
	var binds []bound
	p := &Pool{
		Pin:  func([]byte) (func() error, error) { return func() error { return nil }, nil },
		Node: pl.CurrentNode,
		Bind: func(mem []byte, node int) {
			binds = append(binds, bound{node, len(mem), resident(t, mem)})
			pl.Bind(mem, node)
		},
	}
	const size = 2 * hugePage // a slab that is mapped on huge pages and prefaulted
	get := func(ctx cuda.Context) *Buffer {
		currentCtx(ctx)
		b, err := p.Get(size)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := get(1)
	b := get(2)
	p.Put(a)
	p.Put(b)
	if c := get(1); c != a {
		t.Fatal("node 0 got a buffer other than its own idle one")
	}
	if c := get(2); c != b {
		t.Fatal("node 1 got a buffer other than its own idle one")
	}
	u := get(3) // unknown node: the pool itself
	if u == a || u == b {
		t.Fatal("a GPU of unknown node got a node's buffer")
	}
	if len(binds) != 2 || binds[0].node != 0 || binds[1].node != 1 {
		t.Fatalf("binds %+v, want node 0 then node 1, one slab each", binds)
	}
	for _, bd := range binds {
		if bd.size != size || bd.resident != 0 {
			t.Errorf("bind %+v: want %d bytes, none of them touched yet", bd, size)
		}
	}
	if p.Mapped() != 3*size {
		t.Errorf("mapped %d, want %d", p.Mapped(), 3*size)
	}
	p.Put(a)
	p.Put(b)
	if n := p.Drop(); n != 2*size || p.Mapped() != size {
		t.Errorf("Drop freed %d (mapped %d after), want %d (%d)", n, p.Mapped(), 2*size, size)
	}
	currentCtx(1)
	if err := p.Reserve(3, size); err != nil {
		t.Fatal(err)
	}
	if len(binds) != 3 || binds[2].node != 0 || binds[2].size != 3*size {
		t.Errorf("Reserve on node 0: binds %+v", binds)
	}
	p.Put(u)
	if n := p.Drop(); n != 4*size || p.Mapped() != 0 {
		t.Errorf("last Drop freed %d, mapped %d", n, p.Mapped())
	}
}
