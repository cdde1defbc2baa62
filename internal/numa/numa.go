// Package numa reads a host's NUMA layout from sysfs (the online nodes,
// each node's CPUs, each PCI device's node) and chooses where each GPU's
// staging belongs: on a host of two sockets, the bounce buffers a GPU's
// copies read and the threads that fill them go on the socket the GPU
// hangs off, so that neither crosses the link between sockets. It also
// places threads (sched_setaffinity) and memory (mbind) there.
package numa

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Errors for sysfs text that is not what the kernel writes.
var (
	// ErrCPUList is a malformed cpulist, or a CPU past what a
	// unix.CPUSet holds (1024).
	ErrCPUList = errors.New("numa: malformed CPU or node list")
	// ErrBusID is a PCI address not of the form domain:bus:device.function.
	ErrBusID = errors.New("numa: malformed PCI bus id")
	// ErrNode is a numa_node file that does not hold an integer >= -1.
	ErrNode = errors.New("numa: malformed numa_node")
)

// maxCPU bounds the CPU numbers of a list: a unix.CPUSet holds 0-1023.
const maxCPU = len(unix.CPUSet{}) * 64

// Sysfs is the root of a sysfs tree: "/sys" on a real host, a directory
// of the same files in tests.
type Sysfs string

// read returns the trimmed contents of the file at rel under s.
func (s Sysfs) read(rel string) (string, error) {
	b, err := os.ReadFile(filepath.Join(string(s), rel))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// OnlineNodes lists the online NUMA nodes (devices/system/node/online).
func (s Sysfs) OnlineNodes() ([]int, error) {
	v, err := s.read("devices/system/node/online")
	if err != nil {
		return nil, err
	}
	return ParseList(v)
}

// NodeCPUs returns the CPUs of node (devices/system/node/nodeK/cpulist);
// a node of memory alone has none.
func (s Sysfs) NodeCPUs(node int) (unix.CPUSet, error) {
	var set unix.CPUSet
	v, err := s.read(fmt.Sprintf("devices/system/node/node%d/cpulist", node))
	if err != nil {
		return set, err
	}
	cpus, err := ParseList(v)
	if err != nil {
		return set, fmt.Errorf("node %d cpulist: %w", node, err)
	}
	for _, c := range cpus {
		set.Set(c)
	}
	return set, nil
}

// DeviceNode returns the NUMA node of the PCI device at busID
// (bus/pci/devices/<id>/numa_node): -1 where the kernel does not know it
// (virtual machines, hosts of one node).
func (s Sysfs) DeviceNode(busID string) (int, error) {
	id, err := NormalizeBusID(busID)
	if err != nil {
		return -1, err
	}
	v, err := s.read(filepath.Join("bus/pci/devices", id, "numa_node"))
	if err != nil {
		return -1, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < -1 {
		return -1, fmt.Errorf("%w: %q for %s", ErrNode, v, id)
	}
	return n, nil
}

// NormalizeBusID writes a PCI address as sysfs names its directory,
// "0000:3b:00.0": CUDA's cuDeviceGetPCIBusId gives "0000:3B:00.0", and
// nvidia-smi "00000000:3B:00.0".
func NormalizeBusID(id string) (string, error) {
	bad := fmt.Errorf("%w: %q", ErrBusID, id)
	dom, rest, ok1 := strings.Cut(id, ":")
	bus, rest, ok2 := strings.Cut(rest, ":")
	dev, fn, ok3 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || !ok3 {
		return "", bad
	}
	var v [4]uint64
	for i, f := range []struct {
		s    string
		bits int
	}{{dom, 32}, {bus, 8}, {dev, 5}, {fn, 3}} {
		n, err := strconv.ParseUint(f.s, 16, f.bits)
		if err != nil || f.s == "" || len(f.s) > 8 {
			return "", bad
		}
		v[i] = n
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", v[0], v[1], v[2], v[3]), nil
}

// ParseList parses a kernel list of CPUs or nodes, "0-3,8-11,16" (empty:
// none), each number below 1024; anything else is ErrCPUList.
func ParseList(s string) ([]int, error) {
	var out []int
	if s == "" {
		return nil, nil
	}
	for f := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(f, "-")
		a, errA := strconv.Atoi(lo)
		b, errB := a, error(nil)
		if isRange {
			b, errB = strconv.Atoi(hi)
		}
		if errA != nil || errB != nil || a < 0 || b < a || b >= maxCPU {
			return nil, fmt.Errorf("%w: %q", ErrCPUList, s)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// Choice is where one GPU's staging goes: its node, and the CPUs of that
// node the process may run on.
type Choice struct {
	Node int
	CPUs unix.CPUSet
}

// Policy is the placement on one host: the online nodes with CPUs the
// process may run on. A nil *Policy places nothing.
type Policy struct {
	fs    Sysfs
	nodes map[int]unix.CPUSet // each usable node's CPUs, within allowed
}

// NewPolicy reads the layout under fs for a process allowed to run on
// the CPUs allowed (its sched_getaffinity mask). It returns nil, with no
// error, where there is nothing to do: fewer than two nodes hold CPUs
// the process may use (a host of one socket, or a process bound to one
// node by numactl or a cpuset). A layout it cannot read is an error;
// the caller then places nothing.
func NewPolicy(fs Sysfs, allowed unix.CPUSet) (*Policy, error) {
	online, err := fs.OnlineNodes()
	if err != nil {
		return nil, fmt.Errorf("numa: online nodes: %w", err)
	}
	p := &Policy{fs: fs, nodes: map[int]unix.CPUSet{}}
	for _, n := range online {
		cpus, err := fs.NodeCPUs(n)
		if err != nil {
			return nil, fmt.Errorf("numa: %w", err)
		}
		if set := And(cpus, allowed); set.Count() > 0 {
			p.nodes[n] = set
		}
	}
	if len(p.nodes) < 2 {
		return nil, nil
	}
	return p, nil
}

// ForDevice returns where the staging of the GPU at PCI address busID
// goes. ok is false where it stays where the scheduler puts it: the
// device's node is unknown (-1) or has no CPU the process may use.
func (p *Policy) ForDevice(busID string) (c Choice, ok bool, err error) {
	if p == nil {
		return Choice{Node: -1}, false, nil
	}
	n, err := p.fs.DeviceNode(busID)
	if err != nil {
		return Choice{Node: -1}, false, err
	}
	cpus, ok := p.nodes[n]
	return Choice{Node: n, CPUs: cpus}, ok, nil
}

// NodeCPUs returns the CPUs of node the process may use; none for a node
// it does not place on.
func (p *Policy) NodeCPUs(node int) unix.CPUSet {
	if p == nil {
		return unix.CPUSet{}
	}
	return p.nodes[node]
}

// And returns the CPUs in both a and b.
func And(a, b unix.CPUSet) unix.CPUSet {
	var s unix.CPUSet
	for c := range maxCPU {
		if a.IsSet(c) && b.IsSet(c) {
			s.Set(c)
		}
	}
	return s
}

// FormatCPUs writes a CPU set as the kernel's lists do: "0-3,8".
func FormatCPUs(s unix.CPUSet) string {
	var parts []string
	for c := 0; c < maxCPU; c++ {
		if !s.IsSet(c) {
			continue
		}
		end := c
		for end+1 < maxCPU && s.IsSet(end+1) {
			end++
		}
		if end == c {
			parts = append(parts, strconv.Itoa(c))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", c, end))
		}
		c = end
	}
	return strings.Join(parts, ",")
}
