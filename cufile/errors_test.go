package cufile

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/kvikgo/kvik/cuda"
)

func TestOpErrorTable(t *testing.T) {
	// 0, then 5001..5050 less the unused 5021 and 5032.
	if len(opTable) != 49 {
		t.Errorf("opTable has %d codes, want 49", len(opTable))
	}
	for code := OpError(5001); code <= ErrIOMaxError; code++ {
		_, ok := opTable[code]
		if unused := code == 5021 || code == 5032; ok == unused {
			t.Errorf("code %d: in table = %v", int(code), ok)
		}
	}
	for code, info := range opTable {
		if !strings.HasPrefix(info.name, "CU_FILE_") || info.msg == "" {
			t.Errorf("code %d: bad entry %+v", int(code), info)
		}
	}
}

func TestOpErrorStrings(t *testing.T) {
	for _, tc := range []struct {
		e    OpError
		want string
	}{
		{ErrHandleNotRegistered, "cuFile: file descriptor is not registered (5027 CU_FILE_HANDLE_NOT_REGISTERED)"},
		{ErrInvalidValue, "cuFile: invalid arguments (5022 CU_FILE_INVALID_VALUE)"},
		{ErrCUDADriverError, "cuFile: CUDA Driver API error (5011 CU_FILE_CUDA_DRIVER_ERROR)"},
		{ErrBatchNoCompatError, "cuFile: compat mode off error (5049 CU_FILE_BATCH_NOCOMPAT_ERROR)"},
		{Success, "cuFile: cufile success (0 CU_FILE_SUCCESS)"},
		{5021, "cuFile: unknown cufile error (5021)"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("OpError(%d).Error() = %q, want %q", int(tc.e), got, tc.want)
		}
	}
	if n := ErrHandleNotRegistered.Name(); n != "CU_FILE_HANDLE_NOT_REGISTERED" {
		t.Errorf("Name = %q", n)
	}
	if m := OpError(4).Message(); m != "unknown cufile error" {
		t.Errorf("Message of unknown code = %q", m)
	}
}

func TestErrorIs(t *testing.T) {
	e := &Error{Op: ErrHandleNotRegistered}
	wrapped := fmt.Errorf("open x: %w", e)
	if !errors.Is(wrapped, ErrHandleNotRegistered) {
		t.Error("errors.Is(wrapped, ErrHandleNotRegistered) = false")
	}
	if errors.Is(wrapped, ErrInvalidValue) {
		t.Error("errors.Is(wrapped, ErrInvalidValue) = true")
	}
	if errors.Is(wrapped, ErrLibraryNotFound) {
		t.Error("an OpError matches ErrLibraryNotFound")
	}
	var ce *Error
	if !errors.As(wrapped, &ce) || ce.Op != ErrHandleNotRegistered {
		t.Errorf("errors.As: %v", ce)
	}
	if got, want := e.Error(), ErrHandleNotRegistered.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}

	// A CUDA driver failure carries its CUresult and matches both.
	c := &Error{Op: ErrCUDADriverError, CUDA: cuda.ErrorInvalidContext}
	if !errors.Is(c, ErrCUDADriverError) || !errors.Is(c, cuda.ErrorInvalidContext) {
		t.Errorf("%v does not match its codes", c)
	}
	if errors.Is(c, cuda.ErrorOutOfMemory) || errors.Is(e, cuda.Success) {
		t.Error("matches the wrong CUresult")
	}
	if s := c.Error(); !strings.HasPrefix(s, ErrCUDADriverError.Error()+": ") || !strings.Contains(s, "201") {
		t.Errorf("Error() = %q", s)
	}

	// An errno failure unwraps to the errno.
	io := &Error{Errno: syscall.ENOSPC}
	if !errors.Is(io, syscall.ENOSPC) || errors.Is(io, syscall.EIO) || errors.Is(io, Success) {
		t.Errorf("%v: errno matching wrong", io)
	}
	if !errors.Is(&Error{Errno: syscall.EACCES}, fs.ErrPermission) {
		t.Error("EACCES does not match fs.ErrPermission")
	}
	if s := io.Error(); s != "cuFile: I/O failed: "+syscall.ENOSPC.Error() {
		t.Errorf("Error() = %q", s)
	}
	if s := (&Error{}).Error(); !strings.Contains(s, "errno not available") {
		t.Errorf("Error() = %q", s)
	}
}

func TestDecodeStatus(t *testing.T) {
	if err := decodeStatus(0); err != nil {
		t.Errorf("decodeStatus(0) = %v", err)
	}
	// Garbage in the upper half of a success is ignored.
	if err := decodeStatus(uintptr(uint64(7) << 32)); err != nil {
		t.Errorf("decodeStatus(success, cu_err 7) = %v", err)
	}
	err := decodeStatus(uintptr(uint64(201)<<32 | 5011))
	var e *Error
	if !errors.As(err, &e) || e.Op != ErrCUDADriverError || e.CUDA != cuda.ErrorInvalidContext {
		t.Errorf("decodeStatus(5011, 201) = %#v", err)
	}
	err = decodeStatus(5027)
	if !errors.Is(err, ErrHandleNotRegistered) {
		t.Errorf("decodeStatus(5027) = %v", err)
	}
	if !errors.As(err, &e) || e.CUDA != 0 {
		t.Errorf("decodeStatus(5027) CUDA = %v", e.CUDA)
	}
}

func TestDecodeSSize(t *testing.T) {
	for _, tc := range []struct {
		ret   int64
		errno syscall.Errno
		n     int
		is    error // nil: no error
		op    OpError
		eno   syscall.Errno
	}{
		{0, 0, 0, nil, 0, 0},
		{4097, 0, 4097, nil, 0, 0},
		{1 << 40, 0, 1 << 40, nil, 0, 0},
		{-1, syscall.EIO, 0, syscall.EIO, 0, syscall.EIO},
		{-1, 0, 0, &Error{}, 0, 0},
		{-1, 5019, 0, ErrInvalidFileOpenFlag, ErrInvalidFileOpenFlag, 0},
		{-5027, 0, 0, ErrHandleNotRegistered, ErrHandleNotRegistered, 0},
		{-5011, syscall.EIO, 0, ErrCUDADriverError, ErrCUDADriverError, 0},
		{-int64(syscall.ENOSPC), 0, 0, syscall.ENOSPC, 0, syscall.ENOSPC},
	} {
		n, err := decodeSSize(tc.ret, tc.errno)
		if n != tc.n {
			t.Errorf("decodeSSize(%d): n = %d, want %d", tc.ret, n, tc.n)
		}
		if tc.is == nil {
			if err != nil {
				t.Errorf("decodeSSize(%d): %v", tc.ret, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("decodeSSize(%d) = %#v, want *Error", tc.ret, err)
			continue
		}
		if e.Op != tc.op || e.Errno != tc.eno {
			t.Errorf("decodeSSize(%d) = %+v, want Op %d Errno %d", tc.ret, *e, tc.op, tc.eno)
		}
		if _, empty := tc.is.(*Error); !empty && !errors.Is(err, tc.is) {
			t.Errorf("decodeSSize(%d) = %v, does not match %v", tc.ret, err, tc.is)
		}
	}
}

func TestFlagStrings(t *testing.T) {
	for _, tc := range []struct {
		s    fmt.Stringer
		want string
	}{
		{DriverStatusFlags(0), "0"},
		{NVMeSupported | SCSISupported, "NVMeSupported|SCSISupported"},
		{VirtioFSSupported | 1<<10, "VirtioFSSupported|0x400"},
		{UsePollMode | AllowCompatMode, "UsePollMode|AllowCompatMode"},
		{DriverControlFlags(1 << 5), "0x20"},
		{FeatureFlags(0xf), "DynRoutingSupported|BatchIOSupported|StreamsSupported|ParallelIOSupported"},
		{P2PSupported, "P2PSupported"},
		{Complete, "Complete"},
		{Status(0x80), "0x80"},
		{BatchWrite, "Write"},
		{Opcode(9), "Opcode(9)"},
		{ParamPropertiesBatchIOTimeoutMs, "CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS"},
		{ParamStreamMemopsBypass, "CUFILE_PARAM_STREAM_MEMOPS_BYPASS"},
		{ParamLogDir, "CUFILE_PARAM_LOG_DIR"},
		{StringParameter(3), "StringParameter(3)"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
	for _, s := range []Status{Complete, Canceled, Failed, Invalid, Timeout} {
		if !s.Done() {
			t.Errorf("%v.Done() = false", s)
		}
	}
	if Waiting.Done() || Pending.Done() {
		t.Error("Waiting or Pending counts as done")
	}
	// Enumerator values fixed by cufile.h.
	if ParamPropertiesBatchIOTimeoutMs != 11 || ParamStreamMemopsBypass != 11 || ParamLogDir != 2 {
		t.Error("parameter enumerators out of step with cufile.h")
	}
}

func TestDriverPropertiesHelpers(t *testing.T) {
	p := DriverProperties{ControlFlags: AllowCompatMode}
	if p.PollMode() || !p.AllowCompatMode() || p.NVFSAvailable() {
		t.Errorf("%+v: helpers wrong", p)
	}
	p = DriverProperties{NVFSMajor: 2, ControlFlags: UsePollMode}
	if !p.PollMode() || p.AllowCompatMode() || !p.NVFSAvailable() {
		t.Errorf("%+v: helpers wrong", p)
	}
}
