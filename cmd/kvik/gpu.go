package main

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/cuda"
)

// gpuDevice is CUDA device 0 with its primary context retained: the
// context that allocations and copies of kvik bench and kvik cp use.
type gpuDevice struct {
	dev           cuda.Device
	ctx           cuda.Context
	name          string
	totalMem      int64
	driverVersion int
}

// openGPU initialises the CUDA driver and retains device 0's primary
// context. It fails when there is no driver or no device.
func openGPU() (*gpuDevice, error) {
	if err := cuda.Init(); err != nil {
		if errors.Is(err, cuda.ErrLibraryNotFound) {
			return nil, err // "no CUDA driver (libcuda.so.1 not found)" says it
		}
		return nil, fmt.Errorf("CUDA driver: %w", err)
	}
	n, err := cuda.DeviceGetCount()
	if err != nil {
		return nil, fmt.Errorf("CUDA driver: %w", err)
	}
	if n == 0 {
		return nil, errors.New("CUDA driver: no device")
	}
	g := &gpuDevice{}
	if g.dev, err = cuda.DeviceGet(0); err != nil {
		return nil, fmt.Errorf("CUDA device 0: %w", err)
	}
	g.name, _ = g.dev.Name()
	g.totalMem, _ = g.dev.TotalMem()
	g.driverVersion, _ = cuda.DriverGetVersion()
	if g.ctx, err = g.dev.PrimaryCtxRetain(); err != nil {
		return nil, fmt.Errorf("CUDA device 0 primary context: %w", err)
	}
	return g, nil
}

// close releases the primary context.
func (g *gpuDevice) close() { g.dev.PrimaryCtxRelease() }

// String describes the device: "NVIDIA H100 (79.1 GiB), CUDA driver 13.0".
func (g *gpuDevice) String() string {
	return fmt.Sprintf("GPU 0 %s (%s), CUDA driver %s", g.name, formatSize(g.totalMem), cudaVersion(g.driverVersion))
}

// do runs f with the primary context current.
func (g *gpuDevice) do(f func() error) error { return cuda.WithContext(g.ctx, f) }

// alloc allocates n bytes of device memory in the primary context.
func (g *gpuDevice) alloc(n int) (buf *cuda.DeviceBuffer, err error) {
	err = g.do(func() error {
		buf, err = cuda.MemAlloc(n)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("allocating %s of device memory: %w", formatSize(int64(n)), err)
	}
	return buf, nil
}

// freeMem returns the device's free memory, or 0 if unknown.
func (g *gpuDevice) freeMem() int64 {
	var free int64
	g.do(func() (err error) {
		free, _, err = cuda.MemGetInfo()
		return err
	})
	return free
}

// htod copies host memory to the device.
func (g *gpuDevice) htod(dst cuda.DevicePtr, src []byte) error {
	return g.do(func() error { return cuda.MemcpyHtoD(dst, src) })
}

// dtoh copies device memory to the host.
func (g *gpuDevice) dtoh(dst []byte, src cuda.DevicePtr) error {
	return g.do(func() error { return cuda.MemcpyDtoH(dst, src) })
}

// clear zeroes n bytes of device memory and waits for it.
func (g *gpuDevice) clear(p cuda.DevicePtr, n int) error {
	return g.do(func() error {
		if err := cuda.MemsetD8(p, 0, n); err != nil {
			return err
		}
		return cuda.CtxSynchronize()
	})
}

// cudaVersion renders a driver version such as 13000 as "13.0".
func cudaVersion(v int) string {
	if v <= 0 {
		return "unknown"
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// memoryChoice is the resolved --memory flag.
type memoryChoice struct {
	device bool
	gpu    *gpuDevice // set when device
	note   string     // why host memory was chosen under auto
}

// chooseMemory resolves --memory: "device" needs a GPU, "auto" takes the
// GPU when there is one and host memory otherwise.
func chooseMemory(mode string) (memoryChoice, error) {
	switch mode {
	case "host":
		return memoryChoice{note: "host memory requested"}, nil
	case "device", "auto":
	default:
		return memoryChoice{}, usagef("invalid --memory %q (want auto, host or device)", mode)
	}
	g, err := openGPU()
	switch {
	case err == nil:
		return memoryChoice{device: true, gpu: g}, nil
	case mode == "device":
		return memoryChoice{}, fmt.Errorf("--memory device needs a GPU: %w", err)
	}
	if errors.Is(err, cuda.ErrLibraryNotFound) {
		err = errors.New("no CUDA driver")
	}
	return memoryChoice{note: fmt.Sprintf("no GPU: %v", err)}, nil
}

// allocHost maps n bytes of page-aligned host memory outside the Go heap,
// suitable for O_DIRECT; free unmaps it.
func allocHost(n int64) (buf []byte, free func(), err error) {
	ps := int64(unix.Getpagesize())
	mapped := max((n+ps-1)/ps*ps, ps)
	mem, err := unix.Mmap(-1, 0, int(mapped), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, fmt.Errorf("allocating %s of host memory: %w", formatSize(n), err)
	}
	return mem[:n], func() { unix.Munmap(mem) }, nil
}
