package kvik

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/cufile"
	"github.com/kvikgo/kvik/internal/blockdev"
)

// CompatMode chooses how device I/O reaches the file, as KvikIO's
// KVIKIO_COMPAT_MODE does.
type CompatMode int

const (
	// CompatOff requires cuFile (GPUDirect Storage or cuFile's own
	// compatibility mode); opening fails if cuFile cannot be used.
	CompatOff CompatMode = iota
	// CompatOn uses POSIX I/O only: device data moves through pinned
	// bounce buffers.
	CompatOn
	// CompatAuto uses cuFile where it gives real GPUDirect Storage, and
	// POSIX I/O otherwise (see docs/compat-mode.md).
	CompatAuto
)

// String returns "off", "on" or "auto".
func (m CompatMode) String() string {
	switch m {
	case CompatOff:
		return "off"
	case CompatOn:
		return "on"
	case CompatAuto:
		return "auto"
	}
	return fmt.Sprintf("CompatMode(%d)", int(m))
}

// ParseCompatMode parses a compat mode as KvikIO does: on/true/yes/1,
// off/false/no/0 or auto, case-insensitive, surrounding space ignored.
func ParseCompatMode(s string) (CompatMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "on", "true", "yes", "1":
		return CompatOn, nil
	case "off", "false", "no", "0":
		return CompatOff, nil
	case "auto":
		return CompatAuto, nil
	}
	return 0, fmt.Errorf("%w: %q is not a compat mode (want on, off or auto)", ErrInvalidArgument, s)
}

// CuFileStatus says whether this process can use cuFile, and whether
// cuFile would give true GPUDirect Storage or only its own compatibility
// mode.
type CuFileStatus struct {
	// Usable: libcufile loaded with every needed symbol, /run/udev exists
	// and the kernel is not WSL (KvikIO's conditions).
	Usable bool
	// GDS: the cuFile driver opened and reports an nvidia-fs version, so
	// reads can go straight from storage to GPU memory.
	GDS bool
	// Reason explains the first condition that failed, or what was found.
	Reason string
	// Props holds the cuFile driver properties when the driver opened.
	Props *cufile.DriverProperties
	// Err is the error behind Reason, when one failed; it may be long (a
	// library load error lists every path tried).
	Err error
}

var cuFileProbe = sync.OnceValue(probeCuFile)

// runUdev is the directory KvikIO requires for cuFile; a variable for tests.
var runUdev = "/run/udev"

// ProbeCuFile reports, once per process, what cuFile can do here. It opens
// the cuFile driver when the library is usable.
func ProbeCuFile() CuFileStatus { return cuFileProbe() }

func probeCuFile() CuFileStatus {
	if err := cufile.Load(); err != nil {
		return CuFileStatus{Reason: "libcufile not found (see KVIK_LIBCUFILE_PATH)", Err: err}
	}
	if miss := cufile.MissingSymbols(); len(miss) > 0 {
		return CuFileStatus{Reason: "libcufile lacks " + strings.Join(miss, ", ")}
	}
	if fi, err := os.Stat(runUdev); err != nil || !fi.IsDir() {
		return CuFileStatus{Reason: "cuFile: " + runUdev + " missing"}
	}
	if blockdev.IsWSL() {
		return CuFileStatus{Reason: "cuFile: not supported on WSL"}
	}
	st := CuFileStatus{Usable: true}
	if err := cuda.Init(); err != nil {
		st.Usable, st.Reason, st.Err = false, fmt.Sprintf("CUDA driver unavailable: %v", err), err
		return st
	}
	if err := cufile.DriverOpen(); err != nil {
		st.Usable, st.Reason, st.Err = false, fmt.Sprintf("cuFileDriverOpen: %v", err), err
		return st
	}
	props, err := cufile.DriverGetProperties()
	if err != nil {
		st.Reason, st.Err = fmt.Sprintf("cuFileDriverGetProperties: %v", err), err
		return st
	}
	st.Props = &props
	st.GDS = props.NVFSAvailable()
	if st.GDS {
		st.Reason = fmt.Sprintf("GPUDirect Storage available (nvidia-fs %d.%d)", props.NVFSMajor, props.NVFSMinor)
	} else {
		st.Reason = "cuFile would run its own compatibility mode (no nvidia-fs: GDS unavailable); kvik's POSIX path is faster"
	}
	return st
}

// resolveCompat decides, before a file is opened, whether to try cuFile:
// it returns the mode (CompatOn or CompatOff) and why.
func resolveCompat(m CompatMode) (CompatMode, string, error) {
	switch m {
	case CompatOn:
		return CompatOn, "compat mode on: POSIX I/O requested", nil
	case CompatOff:
		st := ProbeCuFile()
		if !st.Usable {
			return CompatOff, st.Reason, fmt.Errorf("%w: %s", ErrCuFileRequired, st.Reason)
		}
		return CompatOff, "compat mode off: cuFile requested; " + st.Reason, nil
	case CompatAuto:
		st := ProbeCuFile()
		if st.Usable && st.GDS {
			return CompatOff, "auto: " + st.Reason, nil
		}
		return CompatOn, "auto: " + st.Reason, nil
	}
	return 0, "", fmt.Errorf("%w: compat mode %d", ErrInvalidArgument, int(m))
}
