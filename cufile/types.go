package cufile

import (
	"strconv"
	"strings"
)

// Handle is a registered cuFile file handle (CUfileHandle_t), returned by
// HandleRegister. The zero value is not a handle.
type Handle uintptr

// BatchHandle is a cuFile batch I/O context (CUfileBatchHandle_t),
// returned by BatchIOSetUp. The zero value is not a handle.
type BatchHandle uintptr

// DriverStatusFlags is the bit set CUfileDrvProps_t.nvfs.dstatusflags: the
// storage kinds the nvidia-fs driver supports. Bit n is set for the
// CUfileDriverStatusFlags_t enumerator of value n.
type DriverStatusFlags uint32

// The DriverStatusFlags bits (CUfileDriverStatusFlags_t). Bit 10 is
// reserved (YRCloudFile).
const (
	LustreSupported       DriverStatusFlags = 1 << 0  // CU_FILE_LUSTRE_SUPPORTED
	WekaFSSupported       DriverStatusFlags = 1 << 1  // CU_FILE_WEKAFS_SUPPORTED
	NFSSupported          DriverStatusFlags = 1 << 2  // CU_FILE_NFS_SUPPORTED
	GPFSSupported         DriverStatusFlags = 1 << 3  // CU_FILE_GPFS_SUPPORTED
	NVMeSupported         DriverStatusFlags = 1 << 4  // CU_FILE_NVME_SUPPORTED
	NVMeoFSupported       DriverStatusFlags = 1 << 5  // CU_FILE_NVMEOF_SUPPORTED
	SCSISupported         DriverStatusFlags = 1 << 6  // CU_FILE_SCSI_SUPPORTED
	ScaleFluxCSDSupported DriverStatusFlags = 1 << 7  // CU_FILE_SCALEFLUX_CSD_SUPPORTED
	NVMeshSupported       DriverStatusFlags = 1 << 8  // CU_FILE_NVMESH_SUPPORTED
	BeeGFSSupported       DriverStatusFlags = 1 << 9  // CU_FILE_BEEGFS_SUPPORTED
	NVMeP2PSupported      DriverStatusFlags = 1 << 11 // CU_FILE_NVME_P2P_SUPPORTED (deprecated by NVIDIA)
	ScateFSSupported      DriverStatusFlags = 1 << 12 // CU_FILE_SCATEFS_SUPPORTED
	VirtioFSSupported     DriverStatusFlags = 1 << 13 // CU_FILE_VIRTIOFS_SUPPORTED (newer than cuFile 1.15)
)

var statusFlagNames = []flagName{
	{uint32(LustreSupported), "LustreSupported"},
	{uint32(WekaFSSupported), "WekaFSSupported"},
	{uint32(NFSSupported), "NFSSupported"},
	{uint32(GPFSSupported), "GPFSSupported"},
	{uint32(NVMeSupported), "NVMeSupported"},
	{uint32(NVMeoFSupported), "NVMeoFSupported"},
	{uint32(SCSISupported), "SCSISupported"},
	{uint32(ScaleFluxCSDSupported), "ScaleFluxCSDSupported"},
	{uint32(NVMeshSupported), "NVMeshSupported"},
	{uint32(BeeGFSSupported), "BeeGFSSupported"},
	{uint32(NVMeP2PSupported), "NVMeP2PSupported"},
	{uint32(ScateFSSupported), "ScateFSSupported"},
	{uint32(VirtioFSSupported), "VirtioFSSupported"},
}

// String lists the set bits by name, joined with "|", unnamed bits in hex;
// "0" when none is set.
func (f DriverStatusFlags) String() string { return flagString(uint32(f), statusFlagNames) }

// DriverControlFlags is the bit set CUfileDrvProps_t.nvfs.dcontrolflags:
// the driver features in use.
type DriverControlFlags uint32

// The DriverControlFlags bits (CUfileDriverControlFlags_t).
const (
	UsePollMode     DriverControlFlags = 1 << 0 // CU_FILE_USE_POLL_MODE
	AllowCompatMode DriverControlFlags = 1 << 1 // CU_FILE_ALLOW_COMPAT_MODE
)

var controlFlagNames = []flagName{
	{uint32(UsePollMode), "UsePollMode"},
	{uint32(AllowCompatMode), "AllowCompatMode"},
}

// String lists the set bits by name, joined with "|", unnamed bits in hex;
// "0" when none is set.
func (f DriverControlFlags) String() string { return flagString(uint32(f), controlFlagNames) }

// FeatureFlags is the bit set CUfileDrvProps_t.fflags: the library features
// available.
type FeatureFlags uint32

// The FeatureFlags bits (CUfileFeatureFlags_t).
const (
	DynRoutingSupported FeatureFlags = 1 << 0 // CU_FILE_DYN_ROUTING_SUPPORTED
	BatchIOSupported    FeatureFlags = 1 << 1 // CU_FILE_BATCH_IO_SUPPORTED
	StreamsSupported    FeatureFlags = 1 << 2 // CU_FILE_STREAMS_SUPPORTED
	ParallelIOSupported FeatureFlags = 1 << 3 // CU_FILE_PARALLEL_IO_SUPPORTED
	P2PSupported        FeatureFlags = 1 << 4 // CU_FILE_P2P_SUPPORTED (newer than cuFile 1.15)
)

var featureFlagNames = []flagName{
	{uint32(DynRoutingSupported), "DynRoutingSupported"},
	{uint32(BatchIOSupported), "BatchIOSupported"},
	{uint32(StreamsSupported), "StreamsSupported"},
	{uint32(ParallelIOSupported), "ParallelIOSupported"},
	{uint32(P2PSupported), "P2PSupported"},
}

// String lists the set bits by name, joined with "|", unnamed bits in hex;
// "0" when none is set.
func (f FeatureFlags) String() string { return flagString(uint32(f), featureFlagNames) }

type flagName struct {
	bit  uint32
	name string
}

func flagString(v uint32, names []flagName) string {
	if v == 0 {
		return "0"
	}
	var parts []string
	for _, n := range names {
		if v&n.bit != 0 {
			parts = append(parts, n.name)
			v &^= n.bit
		}
	}
	if v != 0 {
		parts = append(parts, "0x"+strconv.FormatUint(uint64(v), 16))
	}
	return strings.Join(parts, "|")
}

// DriverProperties is CUfileDrvProps_t, as DriverGetProperties returns it.
// Sizes are in KiB where the name says KB, as in the C structure.
type DriverProperties struct {
	NVFSMajor, NVFSMinor uint32 // nvidia-fs driver version (nvfs.major_version, minor_version); 0.0 without it
	PollThreshSizeKB     int64  // largest I/O completed by polling in poll mode (nvfs.poll_thresh_size)
	MaxDirectIOSizeKB    int64  // largest chunk issued to the file system (nvfs.max_direct_io_size)
	StatusFlags          DriverStatusFlags
	ControlFlags         DriverControlFlags
	FeatureFlags         FeatureFlags
	MaxDeviceCacheSizeKB uint32 // GPU bounce-buffer space per device (max_device_cache_size)
	PerBufferCacheSizeKB uint32 // size of one GPU bounce buffer (per_buffer_cache_size)
	// MaxDevicePinnedMemSizeKB is the most GPU memory pinned and mapped for
	// cuFileBufRegister (max_device_pinned_mem_size).
	MaxDevicePinnedMemSizeKB uint32
	MaxBatchIOSize           uint32 // most entries in one batch (max_batch_io_size)
	MaxBatchIOTimeoutMsecs   uint32 // batch I/O timeout, milliseconds (max_batch_io_timeout_msecs)
}

// PollMode reports whether cuFileRead/Write complete small I/O by polling
// (ControlFlags has UsePollMode).
func (p DriverProperties) PollMode() bool { return p.ControlFlags&UsePollMode != 0 }

// AllowCompatMode reports whether cuFile may fall back to POSIX I/O through
// host memory (ControlFlags has AllowCompatMode).
func (p DriverProperties) AllowCompatMode() bool { return p.ControlFlags&AllowCompatMode != 0 }

// NVFSAvailable reports whether the nvidia-fs driver answered, that is,
// whether its version is not 0.0.
func (p DriverProperties) NVFSAvailable() bool { return p.NVFSMajor != 0 || p.NVFSMinor != 0 }

// Opcode is a batch operation kind (CUfileOpcode_t).
type Opcode uint32

// The batch opcodes.
const (
	BatchRead  Opcode = 0 // CUFILE_READ
	BatchWrite Opcode = 1 // CUFILE_WRITE
)

// String returns "Read", "Write" or the number.
func (o Opcode) String() string {
	switch o {
	case BatchRead:
		return "Read"
	case BatchWrite:
		return "Write"
	}
	return "Opcode(" + strconv.FormatUint(uint64(o), 10) + ")"
}

// Status is the state of one batch entry (CUfileStatus_t). The values are
// single bits.
type Status uint32

// The batch entry states.
const (
	Waiting  Status = 0x01 // CUFILE_WAITING: not yet submitted
	Pending  Status = 0x02 // CUFILE_PENDING: enqueued
	Invalid  Status = 0x04 // CUFILE_INVALID: ill-formed or could not be enqueued
	Canceled Status = 0x08 // CUFILE_CANCELED
	Complete Status = 0x10 // CUFILE_COMPLETE: done, IOEvent.Ret holds the byte count
	Timeout  Status = 0x20 // CUFILE_TIMEOUT
	Failed   Status = 0x40 // CUFILE_FAILED
)

var statusNames = []flagName{
	{uint32(Waiting), "Waiting"},
	{uint32(Pending), "Pending"},
	{uint32(Invalid), "Invalid"},
	{uint32(Canceled), "Canceled"},
	{uint32(Complete), "Complete"},
	{uint32(Timeout), "Timeout"},
	{uint32(Failed), "Failed"},
}

// String returns the state's name ("Complete"), names joined with "|" if
// several bits are set, unnamed bits in hex.
func (s Status) String() string { return flagString(uint32(s), statusNames) }

// Done reports whether the entry has reached a final state: Complete,
// Canceled, Failed, Invalid or Timeout.
func (s Status) Done() bool {
	return s&(Complete|Canceled|Failed|Invalid|Timeout) != 0
}

// Flags for BufRegister (cufile.h's CU_FILE_RDMA_* macros).
const (
	RDMARegister        = 1      // CU_FILE_RDMA_REGISTER
	RDMARelaxedOrdering = 1 << 1 // CU_FILE_RDMA_RELAXED_ORDERING
)

// Flags for StreamRegister (cufile.h's CU_FILE_STREAM_* macros): which
// parameters of the stream forms are known, and fixed, at submission.
const (
	StreamFixedBufOffset    uint32 = 1 // CU_FILE_STREAM_FIXED_BUF_OFFSET
	StreamFixedFileOffset   uint32 = 2 // CU_FILE_STREAM_FIXED_FILE_OFFSET
	StreamFixedFileSize     uint32 = 4 // CU_FILE_STREAM_FIXED_FILE_SIZE
	StreamPageAlignedInputs uint32 = 8 // CU_FILE_STREAM_PAGE_ALIGNED_INPUTS
)

// C layout mirrors (linux, 64-bit). layout_test.go checks every size and
// offset against cufile.h.

// fileHandleTypeOpaqueFD is CU_FILE_HANDLE_TYPE_OPAQUE_FD.
const fileHandleTypeOpaqueFD = 1

// batchModeBatch is CUFILE_BATCH.
const batchModeBatch = 1

// cDescr mirrors CUfileDescr_t (24 bytes).
type cDescr struct {
	typ    int32   // enum CUfileFileHandleType
	_      int32   // padding
	handle uintptr // union { int fd; void *handle; }: fd in the low 32 bits
	fsOps  uintptr // const CUfileFSOps_t *, NULL
}

// cError mirrors CUfileError_t (8 bytes).
type cError struct {
	err   int32 // CUfileOpError
	cuErr int32 // CUresult
}

// cDrvProps mirrors CUfileDrvProps_t (56 bytes), its nvfs member flattened.
type cDrvProps struct {
	majorVersion           uint32
	minorVersion           uint32
	pollThreshSize         uint64
	maxDirectIOSize        uint64
	dstatusflags           uint32
	dcontrolflags          uint32
	fflags                 uint32
	maxDeviceCacheSize     uint32
	perBufferCacheSize     uint32
	maxDevicePinnedMemSize uint32
	maxBatchIOSize         uint32
	maxBatchIOTimeoutMsecs uint32
}

// cIOParams mirrors CUfileIOParams_t (64 bytes), its u.batch member
// flattened.
type cIOParams struct {
	mode         uint32 // CUfileBatchMode_t
	_            uint32
	devPtrBase   uintptr
	fileOffset   int64
	devPtrOffset int64
	size         uint64
	fh           uintptr
	opcode       uint32 // CUfileOpcode_t
	_            uint32
	cookie       uintptr
}

// cIOEvents mirrors CUfileIOEvents_t (24 bytes).
type cIOEvents struct {
	cookie uintptr
	status uint32 // CUfileStatus_t
	_      uint32
	ret    uint64 // size_t, a negative error or the bytes done
}

// cTimespec mirrors struct timespec (16 bytes).
type cTimespec struct {
	sec  int64
	nsec int64
}
