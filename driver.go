package kvik

import (
	"fmt"

	"github.com/kvikgo/kvik/cufile"
)

// DriverProperties returns the cuFile driver's properties, opening the
// driver if needed. GPUDirect Storage is available when NVFSAvailable
// reports true.
func DriverProperties() (cufile.DriverProperties, error) {
	st := ProbeCuFile()
	if !st.Usable {
		return cufile.DriverProperties{}, fmt.Errorf("%w: %s", ErrCuFileRequired, st.Reason)
	}
	return cufile.DriverGetProperties()
}

// SetDriverPollMode turns cuFile's polling for small I/O on or off
// (cuFileDriverSetPollMode); thresholdKB is the largest polled I/O.
func SetDriverPollMode(poll bool, thresholdKB int) error {
	return withDriver(func() error { return cufile.DriverSetPollMode(poll, thresholdKB) })
}

// SetDriverMaxCacheSize sets cuFile's GPU bounce-buffer space per device.
func SetDriverMaxCacheSize(kb int) error {
	return withDriver(func() error { return cufile.DriverSetMaxCacheSize(kb) })
}

// SetDriverMaxPinnedMemSize sets the most GPU memory cuFile pins per device.
func SetDriverMaxPinnedMemSize(kb int) error {
	return withDriver(func() error { return cufile.DriverSetMaxPinnedMemSize(kb) })
}

func withDriver(f func() error) error {
	if st := ProbeCuFile(); !st.Usable {
		return fmt.Errorf("%w: %s", ErrCuFileRequired, st.Reason)
	}
	return f()
}
