package numa

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BindThread locks the calling goroutine to its OS thread and lets that
// thread run only on cpus. restore gives the thread back its mask and
// unlocks it; if the mask cannot be given back, the thread stays locked,
// and the runtime ends it when the goroutine exits, so no other goroutine
// runs confined to cpus. The goroutine must call restore before it exits
// or runs anything that is not its own.
func BindThread(cpus unix.CPUSet) (restore func(), err error) {
	runtime.LockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("numa: sched_getaffinity: %w", err)
	}
	if err := unix.SchedSetaffinity(0, &cpus); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("numa: sched_setaffinity %s: %w", FormatCPUs(cpus), err)
	}
	return func() {
		if unix.SchedSetaffinity(0, &old) == nil {
			runtime.UnlockOSThread()
		}
	}, nil
}

// mpolPreferred is mbind's MPOL_PREFERRED: allocate on the node given,
// or elsewhere when it has no free memory.
const mpolPreferred = 1

// BindMemory asks the kernel to back the pages of mem that are not yet
// touched with memory of node (mbind, MPOL_PREFERRED). mem must be whole
// pages of an anonymous mapping. Containers often refuse mbind (EPERM
// without CAP_SYS_NICE): FirstTouch is then the way.
func BindMemory(mem []byte, node int) error {
	if len(mem) == 0 {
		return nil
	}
	if node < 0 || node >= maxCPU {
		return fmt.Errorf("numa: mbind to node %d: %w", node, unix.EINVAL)
	}
	var mask [maxCPU / 64]uint64
	mask[node/64] |= 1 << (node % 64)
	_, _, e := unix.Syscall6(unix.SYS_MBIND, uintptr(unsafe.Pointer(unsafe.SliceData(mem))), uintptr(len(mem)),
		mpolPreferred, uintptr(unsafe.Pointer(&mask[0])), uintptr(len(mask)*64+1), 0)
	runtime.KeepAlive(&mask)
	if e != 0 {
		return fmt.Errorf("numa: mbind to node %d: %w", node, e)
	}
	return nil
}

// FirstTouch writes a byte of every page of mem from threads bound to
// cpus, several at once, so that the kernel, which backs a page with
// memory of the node of the CPU that first touches it, puts mem there.
func FirstTouch(mem []byte, cpus unix.CPUSet) error {
	const part = 64 << 20
	ps := unix.Getpagesize()
	parts := (len(mem) + part - 1) / part
	errs := make(chan error, parts)
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, min(cpus.Count(), runtime.GOMAXPROCS(0))))
	for off := 0; off < len(mem); off += part {
		p := mem[off:min(off+part, len(mem))]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			restore, err := BindThread(cpus)
			if err != nil {
				errs <- err
				return
			}
			defer restore()
			for i := 0; i < len(p); i += ps {
				p[i] = 0
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
