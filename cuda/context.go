package cuda

import (
	"errors"
	"runtime"
	"unsafe"

	"github.com/kvikgo/kvik/internal/dl"
)

var (
	procDevicePrimaryCtxRetain  = fn("cuDevicePrimaryCtxRetain")
	procDevicePrimaryCtxRelease = fn("cuDevicePrimaryCtxRelease_v2")
	procCtxCreate               = fn("cuCtxCreate_v2")
	procCtxCreateV4             = fn("cuCtxCreate_v4")
	procCtxDestroy              = fn("cuCtxDestroy_v2")
	procCtxGetCurrent           = fn("cuCtxGetCurrent")
	procCtxSetCurrent           = fn("cuCtxSetCurrent")
	procCtxPushCurrent          = fn("cuCtxPushCurrent_v2")
	procCtxPopCurrent           = fn("cuCtxPopCurrent_v2")
	procCtxGetDevice            = fn("cuCtxGetDevice")
	procCtxSynchronize          = fn("cuCtxSynchronize")
	procCtxGetID                = fn("cuCtxGetId")
)

// Context creation flags (CUctx_flags) for CtxCreate.
const (
	CtxSchedAuto         uint32 = 0x00 // CU_CTX_SCHED_AUTO
	CtxSchedSpin         uint32 = 0x01 // CU_CTX_SCHED_SPIN
	CtxSchedYield        uint32 = 0x02 // CU_CTX_SCHED_YIELD
	CtxSchedBlockingSync uint32 = 0x04 // CU_CTX_SCHED_BLOCKING_SYNC
	CtxMapHost           uint32 = 0x08 // CU_CTX_MAP_HOST
)

// PrimaryCtxRetain retains the device's primary context, the context the
// CUDA runtime and most libraries share, creating it if needed
// (cuDevicePrimaryCtxRetain). Balance each call with PrimaryCtxRelease.
// The context is not made current.
func (d Device) PrimaryCtxRetain() (Context, error) {
	var c Context
	if err := check(procDevicePrimaryCtxRetain.Call(uintptr(unsafe.Pointer(&c)), uintptr(d))); err != nil {
		return 0, err
	}
	return c, nil
}

// PrimaryCtxRelease releases a reference taken by PrimaryCtxRetain
// (cuDevicePrimaryCtxRelease_v2). The primary context is destroyed, with
// all memory allocated in it, when its last reference is released.
func (d Device) PrimaryCtxRelease() error {
	return check(procDevicePrimaryCtxRelease.Call(uintptr(d)))
}

// CtxCreate creates a new context on device d and makes it current on the
// calling OS thread (cuCtxCreate_v2; on drivers without that symbol,
// cuCtxCreate_v4 with no creation parameters). Destroy it with CtxDestroy.
// Callers that go on using the context must hold their goroutine on its
// thread (runtime.LockOSThread) or pop it and use WithContext.
func CtxCreate(flags uint32, d Device) (Context, error) {
	var c Context
	err := check(procCtxCreate.Call(uintptr(unsafe.Pointer(&c)), uintptr(flags), uintptr(d)))
	if se := (*dl.SymbolError)(nil); errors.As(err, &se) {
		// CUDA 13 headers map cuCtxCreate to cuCtxCreate_v4(pctx, params,
		// flags, dev); NULL params behaves as cuCtxCreate_v2.
		err = check(procCtxCreateV4.Call(uintptr(unsafe.Pointer(&c)), 0, uintptr(flags), uintptr(d)))
	}
	if err != nil {
		return 0, err
	}
	return c, nil
}

// CtxDestroy destroys a context created by CtxCreate (cuCtxDestroy_v2),
// freeing everything allocated in it. It must not be used on a primary
// context.
func CtxDestroy(c Context) error {
	return check(procCtxDestroy.Call(uintptr(c)))
}

// CtxGetCurrent returns the context current on the calling OS thread, or 0
// if there is none (cuCtxGetCurrent).
func CtxGetCurrent() (Context, error) {
	var c Context
	if err := check(procCtxGetCurrent.Call(uintptr(unsafe.Pointer(&c)))); err != nil {
		return 0, err
	}
	return c, nil
}

// CtxGetID returns c's ID, unique among the contexts of the process for
// its whole life, unlike the handle, which a later context may reuse
// (cuCtxGetId, CUDA 12.0; an older driver lacks the symbol: an error
// matching ErrLibraryNotFound).
func CtxGetID(c Context) (uint64, error) {
	var id uint64
	if err := check(procCtxGetID.Call(uintptr(c), uintptr(unsafe.Pointer(&id)))); err != nil {
		return 0, err
	}
	return id, nil
}

// CtxSetCurrent replaces the top of the calling OS thread's context stack
// with c, or pops it if c is 0 (cuCtxSetCurrent).
func CtxSetCurrent(c Context) error {
	return check(procCtxSetCurrent.Call(uintptr(c)))
}

// CtxPushCurrent pushes c on the calling OS thread's context stack, making
// it current (cuCtxPushCurrent_v2). The goroutine must stay locked to its
// thread until the matching CtxPopCurrent.
func CtxPushCurrent(c Context) error {
	return check(procCtxPushCurrent.Call(uintptr(c)))
}

// CtxPopCurrent pops the current context off the calling OS thread's
// context stack and returns it (cuCtxPopCurrent_v2).
func CtxPopCurrent() (Context, error) {
	var c Context
	if err := check(procCtxPopCurrent.Call(uintptr(unsafe.Pointer(&c)))); err != nil {
		return 0, err
	}
	return c, nil
}

// CtxGetDevice returns the device of the current context (cuCtxGetDevice).
func CtxGetDevice() (Device, error) {
	var d Device
	if err := check(procCtxGetDevice.Call(uintptr(unsafe.Pointer(&d)))); err != nil {
		return 0, err
	}
	return d, nil
}

// CtxSynchronize waits until all work in the current context has finished
// (cuCtxSynchronize).
func CtxSynchronize() error {
	return check(procCtxSynchronize.Call())
}

// WithContext runs f with c current. CUDA contexts are per OS thread, so
// WithContext locks the calling goroutine to its thread, pushes c, runs f,
// pops c and unlocks the thread; c is popped even if f panics. f must not
// hand the context to other goroutines: they run on other threads. Nested
// and concurrent use is safe; c is pushed even if it is already current.
// The error is f's, or else the one from popping c.
func WithContext(c Context, f func() error) (err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := CtxPushCurrent(c); err != nil {
		return err
	}
	defer func() {
		if _, perr := CtxPopCurrent(); perr != nil && err == nil {
			err = perr
		}
	}()
	return f()
}
