package cufile

import (
	"errors"
	"testing"
	"unsafe"
)

// TestArgumentValidation checks that bad arguments are refused before any
// library call, so it passes with or without libcufile.
func TestArgumentValidation(t *testing.T) {
	asyncErr := func(a *AsyncIO, err error) error {
		if a != nil {
			t.Error("AsyncIO returned with an error")
		}
		return err
	}
	second := func(_ any, err error) error { return err }
	for name, err := range map[string]error{
		"HandleRegister(-1)":             second(HandleRegister(-1)),
		"BufRegister(nil)":               BufRegister(0, 10, 0),
		"BufRegister(size<0)":            BufRegister(1, -1, 0),
		"BufDeregister(nil)":             BufDeregister(0),
		"Read(nil handle)":               second(Read(0, 1, 1, 0, 0)),
		"Read(nil buf)":                  second(Read(1, 0, 1, 0, 0)),
		"Read(size<0)":                   second(Read(1, 1, -1, 0, 0)),
		"Read(fileOffset<0)":             second(Read(1, 1, 1, -1, 0)),
		"Write(bufOffset<0)":             second(Write(1, 1, 1, 0, -1)),
		"ReadAsync(size<0)":              asyncErr(ReadAsync(1, 1, -1, 0, 0, 0)),
		"WriteAsync(nil handle)":         asyncErr(WriteAsync(0, 1, 1, 0, 0, 0)),
		"DriverSetPollMode(-1)":          DriverSetPollMode(true, -1),
		"DriverSetMaxDirectIOSize(-1)":   DriverSetMaxDirectIOSize(-1),
		"DriverSetMaxCacheSize(-1)":      DriverSetMaxCacheSize(-1),
		"DriverSetMaxPinnedMemSize(-1)":  DriverSetMaxPinnedMemSize(-1),
		"BatchIOSetUp(0)":                second(BatchIOSetUp(0)),
		"BatchIOSubmit(nil batch)":       BatchIOSubmit(0, []IOParams{{Handle: 1, Buf: 1, Size: 1}}, 0),
		"BatchIOSubmit(empty)":           BatchIOSubmit(1, nil, 0),
		"BatchIOSubmit(bad opcode)":      BatchIOSubmit(1, []IOParams{{Handle: 1, Buf: 1, Size: 1, Opcode: 7}}, 0),
		"BatchIOSubmit(bad entry)":       BatchIOSubmit(1, []IOParams{{Handle: 1, Buf: 1, Size: 1}, {Handle: 1, Buf: 1, Size: -1}}, 0),
		"BatchIOGetStatus(nil batch)":    second(BatchIOGetStatus(0, 0, make([]IOEvent, 1), 0)),
		"BatchIOGetStatus(no events)":    second(BatchIOGetStatus(1, 0, nil, 0)),
		"BatchIOGetStatus(minNr>len)":    second(BatchIOGetStatus(1, 2, make([]IOEvent, 1), 0)),
		"BatchIOCancel(nil)":             BatchIOCancel(0),
		"SetParameterString(NUL)":        SetParameterString(ParamLogDir, "a\x00b"),
		"SetParameterPosixPoolSlabArray": SetParameterPosixPoolSlabArray([]uint64{1}, nil),
		"GetParameterPosixPoolSlabArray": func() error { _, _, err := GetParameterPosixPoolSlabArray(0); return err }(),
		"AsyncIO(nil).BytesDone":         second((*AsyncIO)(nil).BytesDone()),
	} {
		if !errors.Is(err, ErrInvalidValue) {
			t.Errorf("%s = %v, want an error matching ErrInvalidValue", name, err)
		}
		if errors.Is(err, ErrLibraryNotFound) {
			t.Errorf("%s reached the library: %v", name, err)
		}
	}
	// Calls that return nothing ignore zero handles.
	HandleDeregister(0)
	BatchIODestroy(0)
	(*AsyncIO)(nil).Close()
}

func TestSlotPool(t *testing.T) {
	seen := map[*asyncSlot]bool{}
	var slots []*asyncSlot
	for range 300 { // more than one page's worth
		s, err := getSlot()
		if err != nil {
			t.Fatal(err)
		}
		if seen[s] {
			t.Fatalf("slot %p handed out twice", s)
		}
		if uintptr(unsafe.Pointer(s))%8 != 0 {
			t.Fatalf("slot %p misaligned", s)
		}
		seen[s] = true
		s.bytesDone = 42
		slots = append(slots, s)
	}
	for _, s := range slots {
		putSlot(s)
	}
	s, err := getSlot()
	if err != nil {
		t.Fatal(err)
	}
	if !seen[s] || *s != (asyncSlot{}) {
		t.Errorf("reused slot %p not cleared: %+v", s, *s)
	}
	a := &AsyncIO{slot: s}
	if n, err := a.BytesDone(); n != 0 || err != nil {
		t.Errorf("BytesDone of a fresh slot = %d, %v", n, err)
	}
	s.bytesDone = -5027
	if _, err := a.BytesDone(); !errors.Is(err, ErrHandleNotRegistered) {
		t.Errorf("BytesDone = %v", err)
	}
	a.Close()
	a.Close()
	if _, err := a.BytesDone(); !errors.Is(err, ErrInvalidValue) {
		t.Errorf("BytesDone after Close = %v", err)
	}
}
