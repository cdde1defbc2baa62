package cuda

import (
	"unsafe"
)

var (
	procModuleLoadData    = fn("cuModuleLoadData")
	procModuleGetFunction = fn("cuModuleGetFunction")
	procModuleUnload      = fn("cuModuleUnload")
	procLaunchKernel      = fn("cuLaunchKernel")
)

// Module is a CUDA module handle (CUmodule): kernels loaded into a
// context.
type Module uintptr

// Function is a kernel of a loaded module (CUfunction).
type Function uintptr

// Dim3 is the size of a grid in blocks or of a block in threads; a zero
// member counts as 1.
type Dim3 struct{ X, Y, Z uint32 }

// ModuleLoadData loads a module into the current context
// (cuModuleLoadData) from image: PTX text, which the driver compiles for
// the context's device (the text need not end in a NUL byte; one is
// added), or a cubin or fatbin. PTX the driver cannot compile fails with
// ErrorInvalidPTX, ErrorUnsupportedPTXVersion or
// ErrorJITCompilerNotFound; other bytes with ErrorInvalidImage. Unload
// the module with ModuleUnload.
func ModuleLoadData(image []byte) (Module, error) {
	if len(image) == 0 {
		return 0, invalid("ModuleLoadData", "empty image")
	}
	if image[len(image)-1] != 0 {
		image = append(image[:len(image):len(image)], 0)
	}
	var m Module
	if err := check(procModuleLoadData.Call(uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&image[0])))); err != nil {
		return 0, err
	}
	return m, nil
}

// ModuleGetFunction returns the kernel of m named name
// (cuModuleGetFunction); ErrorNotFound if m has none of that name.
func ModuleGetFunction(m Module, name string) (Function, error) {
	c := append([]byte(name), 0)
	var f Function
	if err := check(procModuleGetFunction.Call(uintptr(unsafe.Pointer(&f)), uintptr(m), uintptr(unsafe.Pointer(&c[0])))); err != nil {
		return 0, err
	}
	return f, nil
}

// ModuleUnload unloads m from the current context (cuModuleUnload); its
// functions must not be launched after.
func ModuleUnload(m Module) error {
	return check(procModuleUnload.Call(uintptr(m)))
}

// LaunchKernel queues f on stream s in the current context
// (cuLaunchKernel): a grid of grid blocks of block threads each, with
// sharedMem bytes of dynamic shared memory per block. params points at
// each of f's parameters in order, each value of the type and size the
// kernel declares; the driver copies them before LaunchKernel returns.
func LaunchKernel(f Function, grid, block Dim3, sharedMem uint32, s Stream, params []unsafe.Pointer) error {
	return check(procLaunchKernel.Call(uintptr(f), uintptr(one(grid.X)), uintptr(one(grid.Y)), uintptr(one(grid.Z)),
		uintptr(one(block.X)), uintptr(one(block.Y)), uintptr(one(block.Z)), uintptr(sharedMem), uintptr(s),
		uintptr(unsafe.Pointer(unsafe.SliceData(params))), 0))
}

// one returns n, or 1 for 0.
func one(n uint32) uint32 { return max(n, 1) }
