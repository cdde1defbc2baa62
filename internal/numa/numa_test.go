package numa

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fakeSysfs writes the files of a sysfs tree under a temporary root:
// rel path -> contents.
func fakeSysfs(t *testing.T, files map[string]string) Sysfs {
	t.Helper()
	root := t.TempDir()
	for rel, v := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Sysfs(root)
}

// twoSockets is a host of two nodes of 8 CPUs each (hyperthreads
// numbered after the cores, as on real two-socket hosts) with GPUs on
// each, one of unknown node and one with a malformed numa_node.
func twoSockets(t *testing.T) Sysfs {
	return fakeSysfs(t, map[string]string{
		"devices/system/node/online":             "0-1\n",
		"devices/system/node/node0/cpulist":      "0-3,8-11\n",
		"devices/system/node/node1/cpulist":      "4-7,12-15\n",
		"bus/pci/devices/0000:3b:00.0/numa_node": "0\n",
		"bus/pci/devices/0000:af:00.0/numa_node": "1\n",
		"bus/pci/devices/0000:d8:00.0/numa_node": "-1\n",
		"bus/pci/devices/0000:5e:00.0/numa_node": "one\n",
	})
}

func cpuSet(cpus ...int) unix.CPUSet {
	var s unix.CPUSet
	for _, c := range cpus {
		s.Set(c)
	}
	return s
}

func span(lo, hi int) []int {
	var s []int
	for c := lo; c <= hi; c++ {
		s = append(s, c)
	}
	return s
}

// TestPolicyTwoSockets checks the choice for each GPU of a two-socket
// host: its node's CPUs for a known node, nothing for -1, typed errors
// for a malformed numa_node or bus id, fs.ErrNotExist for a device sysfs
// lacks; CUDA's and nvidia-smi's spellings of an address find the same
// directory.
func TestPolicyTwoSockets(t *testing.T) {
	fs0 := twoSockets(t)
	p, err := NewPolicy(fs0, cpuSet(span(0, 15)...))
	if err != nil || p == nil {
		t.Fatalf("NewPolicy: %v, %v", p, err)
	}
	for _, c := range []struct {
		bus  string
		node int
		cpus []int
	}{
		{"0000:3B:00.0", 0, append(span(0, 3), span(8, 11)...)},
		{"00000000:AF:00.0", 1, append(span(4, 7), span(12, 15)...)},
		{"0000:af:00.0", 1, append(span(4, 7), span(12, 15)...)},
	} {
		got, ok, err := p.ForDevice(c.bus)
		if err != nil || !ok || got.Node != c.node || got.CPUs != cpuSet(c.cpus...) {
			t.Errorf("%s: %+v (%s), %v, %v; want node %d", c.bus, got, FormatCPUs(got.CPUs), ok, err, c.node)
		}
	}
	if got, ok, err := p.ForDevice("0000:d8:00.0"); ok || err != nil || got.Node != -1 {
		t.Errorf("numa_node -1: %+v, %v, %v; want no placement", got, ok, err)
	}
	if _, ok, err := p.ForDevice("0000:5e:00.0"); ok || !errors.Is(err, ErrNode) {
		t.Errorf("numa_node \"one\": %v, %v; want ErrNode", ok, err)
	}
	if _, ok, err := p.ForDevice("0000:01:00.0"); ok || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a device sysfs lacks: %v, %v; want fs.ErrNotExist", ok, err)
	}
	if _, ok, err := p.ForDevice("GPU-1234"); ok || !errors.Is(err, ErrBusID) {
		t.Errorf("a UUID for an address: %v, %v; want ErrBusID", ok, err)
	}
	if got := p.NodeCPUs(1); got != cpuSet(append(span(4, 7), span(12, 15)...)...) {
		t.Errorf("node 1's CPUs %s", FormatCPUs(got))
	}
	var nilPolicy *Policy
	if _, ok, err := nilPolicy.ForDevice("0000:3b:00.0"); ok || err != nil {
		t.Error("a nil Policy placed a GPU")
	}
}

// TestPolicyAllowedCPUs checks that only CPUs the process may run on are
// chosen, and that a process confined to one node (numactl, a cpuset) or
// a host of one node gets no policy at all.
func TestPolicyAllowedCPUs(t *testing.T) {
	fs0 := twoSockets(t)
	p, err := NewPolicy(fs0, cpuSet(2, 3, 4, 5))
	if err != nil || p == nil {
		t.Fatalf("NewPolicy: %v, %v", p, err)
	}
	if c, ok, _ := p.ForDevice("0000:3b:00.0"); !ok || c.CPUs != cpuSet(2, 3) {
		t.Errorf("node 0 within CPUs 2-5: %s, %v", FormatCPUs(c.CPUs), ok)
	}
	if p, err := NewPolicy(fs0, cpuSet(append(span(4, 7), span(12, 15)...)...)); p != nil || err != nil {
		t.Errorf("a process on node 1's CPUs alone: %v, %v; want no policy", p, err)
	}
	one := fakeSysfs(t, map[string]string{
		"devices/system/node/online":        "0",
		"devices/system/node/node0/cpulist": "0-31",
	})
	if p, err := NewPolicy(one, cpuSet(span(0, 31)...)); p != nil || err != nil {
		t.Errorf("one node: %v, %v; want no policy", p, err)
	}
	// A node of memory alone (CXL, HBM) holds no CPU: not a place for
	// threads, and a host of one such node beside one of CPUs is one node.
	memOnly := fakeSysfs(t, map[string]string{
		"devices/system/node/online":             "0-1",
		"devices/system/node/node0/cpulist":      "0-7",
		"devices/system/node/node1/cpulist":      "\n",
		"bus/pci/devices/0000:3b:00.0/numa_node": "1",
	})
	if p, err := NewPolicy(memOnly, cpuSet(span(0, 7)...)); p != nil || err != nil {
		t.Errorf("a memory-only node beside one of CPUs: %v, %v; want no policy", p, err)
	}
}

// TestPolicyBrokenSysfs checks that a layout that cannot be read is an
// error (the caller places nothing), typed where the text is malformed.
func TestPolicyBrokenSysfs(t *testing.T) {
	all := cpuSet(span(0, 15)...)
	if _, err := NewPolicy(fakeSysfs(t, nil), all); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no node directory: %v, want fs.ErrNotExist", err)
	}
	missing := fakeSysfs(t, map[string]string{
		"devices/system/node/online":        "0-1",
		"devices/system/node/node0/cpulist": "0-7",
	})
	if _, err := NewPolicy(missing, all); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("node 1 without a cpulist: %v, want fs.ErrNotExist", err)
	}
	for _, bad := range []string{"0-", "3-1", "a", "0,,1", "1024", "0-1024", "-1", "0 1"} {
		f := fakeSysfs(t, map[string]string{
			"devices/system/node/online":        "0-1",
			"devices/system/node/node0/cpulist": "0-7",
			"devices/system/node/node1/cpulist": bad,
		})
		if _, err := NewPolicy(f, all); !errors.Is(err, ErrCPUList) {
			t.Errorf("cpulist %q: %v, want ErrCPUList", bad, err)
		}
	}
	bad := fakeSysfs(t, map[string]string{"devices/system/node/online": "0-x"})
	if _, err := NewPolicy(bad, all); !errors.Is(err, ErrCPUList) {
		t.Errorf("online 0-x: %v, want ErrCPUList", err)
	}
}

// TestParseList checks lists against their members, and FormatCPUs
// against the kernel's way of writing them.
func TestParseList(t *testing.T) {
	for in, want := range map[string][]int{
		"":              nil,
		"0":             {0},
		"0-3,8-11":      {0, 1, 2, 3, 8, 9, 10, 11},
		"5,1-2":         {5, 1, 2},
		"1023":          {1023},
		"0-2,4,1022-23": nil, // "23" < 1022: malformed
	} {
		got, err := ParseList(in)
		if want == nil && in != "" {
			if !errors.Is(err, ErrCPUList) {
				t.Errorf("%q: %v, %v; want ErrCPUList", in, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	if got := FormatCPUs(cpuSet(0, 1, 2, 3, 8, 10, 11, 1023)); got != "0-3,8,10-11,1023" {
		t.Errorf("FormatCPUs: %q", got)
	}
}

// TestNormalizeBusID checks the spellings of PCI addresses.
func TestNormalizeBusID(t *testing.T) {
	for in, want := range map[string]string{
		"0000:3B:00.0":     "0000:3b:00.0",
		"00000000:3b:1f.7": "0000:3b:1f.7",
		"10000:E1:00.0":    "10000:e1:00.0", // a VMD domain
		"1:2:3.4":          "0001:02:03.4",
	} {
		if got, err := NormalizeBusID(in); got != want || err != nil {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "3b:00.0", "0000:3b:00", "0000:3b:20.0", "0000:3b:00.8", "0000:100:00.0", "x:3b:00.0", "0000::00.0", "0000:3b:00.0/../../x"} {
		if _, err := NormalizeBusID(bad); !errors.Is(err, ErrBusID) {
			t.Errorf("%q: %v, want ErrBusID", bad, err)
		}
	}
}

// TestBindThread binds the calling thread to one of its CPUs: the
// thread's mask is that CPU until restore, and its old mask after.
func TestBindThread(t *testing.T) {
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Skip(err)
	}
	one := -1
	for c := maxCPU - 1; c >= 0; c-- {
		if old.IsSet(c) {
			one = c
			break
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // held past restore: the same thread after it
		defer runtime.UnlockOSThread()
		restore, err := BindThread(cpuSet(one))
		if err != nil {
			t.Error(err)
			return
		}
		var now unix.CPUSet
		unix.SchedGetaffinity(0, &now)
		if now != cpuSet(one) {
			t.Errorf("bound to CPU %d, the thread's mask is %s", one, FormatCPUs(now))
		}
		restore()
		unix.SchedGetaffinity(0, &now)
		if now != old {
			t.Errorf("after restore the mask is %s, want %s", FormatCPUs(now), FormatCPUs(old))
		}
	}()
	<-done
	if _, err := BindThread(unix.CPUSet{}); err == nil {
		t.Error("binding to no CPU succeeded")
	}
}

// TestBindMemoryAndFirstTouch places a mapping on node 0 (every Linux
// host has it): mbind where the kernel allows it, and first touch from
// threads on the node's CPUs, after which every page is resident.
func TestBindMemoryAndFirstTouch(t *testing.T) {
	const n = 8 << 20
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := BindMemory(mem, 0); err != nil && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.ENOSYS) {
		t.Errorf("mbind to node 0: %v", err)
	}
	if err := BindMemory(mem, -1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("mbind to node -1: %v, want EINVAL", err)
	}
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Skip(err)
	}
	if err := FirstTouch(mem, all); err != nil {
		t.Fatal(err)
	}
	vec := make([]byte, n/unix.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	for i, v := range vec {
		if v&1 == 0 {
			t.Fatalf("page %d of %d not resident after FirstTouch", i, len(vec))
		}
	}
}
