package cufile

import (
	"testing"
	"unsafe"
)

// TestLayout checks each C mirror against cufile.h's layout on 64-bit
// Linux (see /work/shared/reference/cufile-abi.md).
func TestLayout(t *testing.T) {
	type field struct {
		name      string
		got, want uintptr
	}
	check := func(typ string, size, wantSize uintptr, fields ...field) {
		t.Helper()
		if size != wantSize {
			t.Errorf("sizeof(%s) = %d, want %d", typ, size, wantSize)
		}
		for _, f := range fields {
			if f.got != f.want {
				t.Errorf("offsetof(%s.%s) = %d, want %d", typ, f.name, f.got, f.want)
			}
		}
	}

	var d cDescr
	check("CUfileDescr_t", unsafe.Sizeof(d), 24,
		field{"type", unsafe.Offsetof(d.typ), 0},
		field{"handle", unsafe.Offsetof(d.handle), 8},
		field{"fs_ops", unsafe.Offsetof(d.fsOps), 16},
	)

	var e cError
	check("CUfileError_t", unsafe.Sizeof(e), 8,
		field{"err", unsafe.Offsetof(e.err), 0},
		field{"cu_err", unsafe.Offsetof(e.cuErr), 4},
	)
	if a := unsafe.Alignof(e); a != 4 {
		t.Errorf("alignof(CUfileError_t) = %d, want 4", a)
	}

	var p cDrvProps
	check("CUfileDrvProps_t", unsafe.Sizeof(p), 56,
		field{"nvfs.major_version", unsafe.Offsetof(p.majorVersion), 0},
		field{"nvfs.minor_version", unsafe.Offsetof(p.minorVersion), 4},
		field{"nvfs.poll_thresh_size", unsafe.Offsetof(p.pollThreshSize), 8},
		field{"nvfs.max_direct_io_size", unsafe.Offsetof(p.maxDirectIOSize), 16},
		field{"nvfs.dstatusflags", unsafe.Offsetof(p.dstatusflags), 24},
		field{"nvfs.dcontrolflags", unsafe.Offsetof(p.dcontrolflags), 28},
		field{"fflags", unsafe.Offsetof(p.fflags), 32},
		field{"max_device_cache_size", unsafe.Offsetof(p.maxDeviceCacheSize), 36},
		field{"per_buffer_cache_size", unsafe.Offsetof(p.perBufferCacheSize), 40},
		field{"max_device_pinned_mem_size", unsafe.Offsetof(p.maxDevicePinnedMemSize), 44},
		field{"max_batch_io_size", unsafe.Offsetof(p.maxBatchIOSize), 48},
		field{"max_batch_io_timeout_msecs", unsafe.Offsetof(p.maxBatchIOTimeoutMsecs), 52},
	)

	var io cIOParams
	check("CUfileIOParams_t", unsafe.Sizeof(io), 64,
		field{"mode", unsafe.Offsetof(io.mode), 0},
		field{"u.batch.devPtr_base", unsafe.Offsetof(io.devPtrBase), 8},
		field{"u.batch.file_offset", unsafe.Offsetof(io.fileOffset), 16},
		field{"u.batch.devPtr_offset", unsafe.Offsetof(io.devPtrOffset), 24},
		field{"u.batch.size", unsafe.Offsetof(io.size), 32},
		field{"fh", unsafe.Offsetof(io.fh), 40},
		field{"opcode", unsafe.Offsetof(io.opcode), 48},
		field{"cookie", unsafe.Offsetof(io.cookie), 56},
	)

	var ev cIOEvents
	check("CUfileIOEvents_t", unsafe.Sizeof(ev), 24,
		field{"cookie", unsafe.Offsetof(ev.cookie), 0},
		field{"status", unsafe.Offsetof(ev.status), 8},
		field{"ret", unsafe.Offsetof(ev.ret), 16},
	)

	var ts cTimespec
	check("struct timespec", unsafe.Sizeof(ts), 16,
		field{"tv_sec", unsafe.Offsetof(ts.sec), 0},
		field{"tv_nsec", unsafe.Offsetof(ts.nsec), 8},
	)

	// The stream forms' argument block: four 8-byte values.
	var s asyncSlot
	check("asyncSlot", unsafe.Sizeof(s), 32,
		field{"size", unsafe.Offsetof(s.size), 0},
		field{"fileOffset", unsafe.Offsetof(s.fileOffset), 8},
		field{"bufOffset", unsafe.Offsetof(s.bufOffset), 16},
		field{"bytesDone", unsafe.Offsetof(s.bytesDone), 24},
	)

	// CUfileStatsLevel1_t as documented for cuFile 1.15: 6 counters, 10
	// values, 15 counters, 12 values, all 8-byte words.
	var st StatsL1
	check("CUfileStatsLevel1_t", unsafe.Sizeof(st), 64*8,
		field{"read_ops", unsafe.Offsetof(st.ReadOps), 0},
		field{"buf_deregister_ops", unsafe.Offsetof(st.BufDeregisterOps), 80},
		field{"read_bytes", unsafe.Offsetof(st.ReadBytes), 96},
		field{"write_lat_sum_us", unsafe.Offsetof(st.WriteLatSumUs), 168},
		field{"batch_submit_ops", unsafe.Offsetof(st.BatchSubmitOps), 176},
		field{"batch_total_submit_ops", unsafe.Offsetof(st.BatchTotalSubmitOps), 400},
		field{"batch_read_bytes", unsafe.Offsetof(st.BatchReadBytes), 416},
		field{"last_batch_write_bytes", unsafe.Offsetof(st.LastBatchWriteBytes), 504},
	)
}
