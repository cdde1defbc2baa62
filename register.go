package kvik

import (
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/cufile"
	"github.com/kvikgo/kvik/internal/devmem"
)

// cuFileActive reports whether the cuFile driver is open and usable, so
// that registrations can be made.
func cuFileActive() bool { return ProbeCuFile().Usable }

// BufferRegister registers size bytes of device memory at buf with cuFile
// (cuFileBufRegister), which saves cuFile from staging transfers through
// its own buffers. It does nothing where cuFile cannot be used, as KvikIO's
// buffer_register does in compat mode.
func BufferRegister(buf cuda.DevicePtr, size int) error {
	if !cuFileActive() {
		return nil
	}
	r, err := devmem.Resolve(buf, size, 0)
	if err != nil {
		return err
	}
	return cuda.WithContext(r.Ctx, func() error { return cufile.BufRegister(buf, size, 0) })
}

// BufferDeregister undoes BufferRegister.
func BufferDeregister(buf cuda.DevicePtr) error {
	if !cuFileActive() {
		return nil
	}
	r, err := devmem.Resolve(buf, 0, 0)
	if err != nil {
		return err
	}
	return cuda.WithContext(r.Ctx, func() error { return cufile.BufDeregister(buf) })
}

// MemoryRegister registers the whole allocation that contains buf.
func MemoryRegister(buf cuda.DevicePtr) error {
	return withAllocation(buf, func(base cuda.DevicePtr, size int) error {
		return cufile.BufRegister(base, size, 0)
	})
}

// MemoryDeregister undoes MemoryRegister.
func MemoryDeregister(buf cuda.DevicePtr) error {
	return withAllocation(buf, func(base cuda.DevicePtr, _ int) error {
		return cufile.BufDeregister(base)
	})
}

// withAllocation finds the allocation that contains buf and, where cuFile
// is usable, calls f on it with the allocation's context current.
func withAllocation(buf cuda.DevicePtr, f func(base cuda.DevicePtr, size int) error) error {
	r, err := devmem.Resolve(buf, 0, 0)
	if err != nil {
		return err
	}
	return cuda.WithContext(r.Ctx, func() error {
		base, size, err := cuda.MemGetAddressRange(buf)
		if err != nil || !cuFileActive() {
			return err
		}
		return f(base, size)
	})
}
