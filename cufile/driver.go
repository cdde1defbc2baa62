package cufile

import "unsafe"

// DriverOpen opens the cuFile driver session (cuFileDriverOpen), reading
// the configuration ($CUFILE_ENV_PATH_JSON, else /etc/cufile.json). It is
// optional: the first HandleRegister, BufRegister, Read or Write opens the
// driver implicitly. Calling it while the driver is open succeeds and
// counts one more user (see DriverClose).
func DriverOpen() error {
	return callStatus(fnDriverOpen)
}

// DriverClose closes the cuFile driver session and releases its resources
// (cuFileDriverClose_v2, or cuFileDriverClose where the library predates
// it); buffers still registered are deregistered. cuFile counts its users
// (UseCount): with cuFile 1.15 a DriverClose undoes one DriverOpen, and
// the session ends when the count reaches 0.
func DriverClose() error {
	return callStatus(fnDriverClose)
}

// UseCount returns cuFile's count of driver users (cuFileUseCount): 0 when
// the driver session is closed.
func UseCount() (int, error) {
	r, err := fnUseCount.Call()
	if err != nil {
		return 0, err
	}
	return int(int64(r)), nil
}

// GetVersion returns the cuFile library version as 1000*major + 10*minor
// (1150 for cuFile 1.15), from cuFileGetVersion. Libraries older than
// cuFile 1.8 (CUDA 12.3) lack the function: the error then matches
// ErrLibraryNotFound and names the symbol.
func GetVersion() (int, error) {
	var v int32
	if err := callStatus(fnGetVersion, uintptr(unsafe.Pointer(&v))); err != nil {
		return 0, err
	}
	return int(v), nil
}

// DriverGetProperties returns the driver session's properties
// (cuFileDriverGetProperties).
func DriverGetProperties() (DriverProperties, error) {
	var c cDrvProps
	if err := callStatus(fnDriverGetProperties, uintptr(unsafe.Pointer(&c))); err != nil {
		return DriverProperties{}, err
	}
	return DriverProperties{
		NVFSMajor:                c.majorVersion,
		NVFSMinor:                c.minorVersion,
		PollThreshSizeKB:         int64(c.pollThreshSize),
		MaxDirectIOSizeKB:        int64(c.maxDirectIOSize),
		StatusFlags:              DriverStatusFlags(c.dstatusflags),
		ControlFlags:             DriverControlFlags(c.dcontrolflags),
		FeatureFlags:             FeatureFlags(c.fflags),
		MaxDeviceCacheSizeKB:     c.maxDeviceCacheSize,
		PerBufferCacheSizeKB:     c.perBufferCacheSize,
		MaxDevicePinnedMemSizeKB: c.maxDevicePinnedMemSize,
		MaxBatchIOSize:           c.maxBatchIOSize,
		MaxBatchIOTimeoutMsecs:   c.maxBatchIOTimeoutMsecs,
	}, nil
}

// DriverSetPollMode sets whether cuFileRead/Write complete I/O of at most
// pollThresholdKB KiB by polling (cuFileDriverSetPollMode), overriding the
// configuration's properties.use_poll_mode and poll_max_size_kb for this
// process.
func DriverSetPollMode(poll bool, pollThresholdKB int) error {
	if pollThresholdKB < 0 {
		return invalid("DriverSetPollMode", "negative threshold %d", pollThresholdKB)
	}
	var p uintptr
	if poll {
		p = 1
	}
	return callStatus(fnDriverSetPollMode, p, uintptr(pollThresholdKB))
}

// DriverSetMaxDirectIOSize sets the largest chunk, in KiB, that cuFile
// issues to the file system (cuFileDriverSetMaxDirectIOSize).
func DriverSetMaxDirectIOSize(kb int) error {
	if kb < 0 {
		return invalid("DriverSetMaxDirectIOSize", "negative size %d", kb)
	}
	return callStatus(fnDriverSetMaxDirectIOSize, uintptr(kb))
}

// DriverSetMaxCacheSize sets the GPU bounce-buffer space per device, in KiB
// (cuFileDriverSetMaxCacheSize).
func DriverSetMaxCacheSize(kb int) error {
	if kb < 0 {
		return invalid("DriverSetMaxCacheSize", "negative size %d", kb)
	}
	return callStatus(fnDriverSetMaxCacheSize, uintptr(kb))
}

// DriverSetMaxPinnedMemSize sets the most GPU memory, in KiB, that
// BufRegister may pin and map (cuFileDriverSetMaxPinnedMemSize).
func DriverSetMaxPinnedMemSize(kb int) error {
	if kb < 0 {
		return invalid("DriverSetMaxPinnedMemSize", "negative size %d", kb)
	}
	return callStatus(fnDriverSetMaxPinnedMemSize, uintptr(kb))
}
