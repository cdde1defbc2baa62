package cufile

import (
	"bytes"
	"strconv"
	"strings"
	"unsafe"
)

// The functions in this file are recent additions to libcufile (the
// cuFile of CUDA 12.9 and later has them); with an older library they
// return an error that matches ErrLibraryNotFound and names the missing
// symbol.

// SizeTParameter names a numeric configuration parameter
// (CUFileSizeTConfigParameter_t).
type SizeTParameter int32

// The numeric parameters, with their cufile.json keys' meaning. Sizes are
// in KiB where the name says KB.
const (
	ParamProfileStats                       SizeTParameter = iota // CUFILE_PARAM_PROFILE_STATS
	ParamExecutionMaxIOQueueDepth                                 // CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH
	ParamExecutionMaxIOThreads                                    // CUFILE_PARAM_EXECUTION_MAX_IO_THREADS
	ParamExecutionMinIOThresholdSizeKB                            // CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB
	ParamExecutionMaxRequestParallelism                           // CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM
	ParamPropertiesMaxDirectIOSizeKB                              // CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB
	ParamPropertiesMaxDeviceCacheSizeKB                           // CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB
	ParamPropertiesPerBufferCacheSizeKB                           // CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB
	ParamPropertiesMaxDevicePinnedMemSizeKB                       // CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB
	ParamPropertiesIOBatchSize                                    // CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE
	ParamPollThresholdSizeKB                                      // CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB
	ParamPropertiesBatchIOTimeoutMs                               // CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS
)

var sizeTParamNames = [...]string{
	"CUFILE_PARAM_PROFILE_STATS",
	"CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH",
	"CUFILE_PARAM_EXECUTION_MAX_IO_THREADS",
	"CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB",
	"CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM",
	"CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB",
	"CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB",
	"CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB",
	"CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB",
	"CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE",
	"CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB",
	"CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS",
}

// String returns the C enumerator name.
func (p SizeTParameter) String() string {
	return enumName(int(p), sizeTParamNames[:], "SizeTParameter")
}

// BoolParameter names a boolean configuration parameter
// (CUFileBoolConfigParameter_t).
type BoolParameter int32

// The boolean parameters.
const (
	ParamPropertiesUsePollMode       BoolParameter = iota // CUFILE_PARAM_PROPERTIES_USE_POLL_MODE
	ParamPropertiesAllowCompatMode                        // CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE
	ParamForceCompatMode                                  // CUFILE_PARAM_FORCE_COMPAT_MODE
	ParamFSMiscAPICheckAggressive                         // CUFILE_PARAM_FS_MISC_API_CHECK_AGGRESSIVE
	ParamExecutionParallelIO                              // CUFILE_PARAM_EXECUTION_PARALLEL_IO
	ParamProfileNVTX                                      // CUFILE_PARAM_PROFILE_NVTX (deprecated: getting or setting it fails)
	ParamPropertiesAllowSystemMemory                      // CUFILE_PARAM_PROPERTIES_ALLOW_SYSTEM_MEMORY
	ParamUsePCIP2PDMA                                     // CUFILE_PARAM_USE_PCIP2PDMA
	ParamPreferIOURing                                    // CUFILE_PARAM_PREFER_IO_URING
	ParamForceODirectMode                                 // CUFILE_PARAM_FORCE_ODIRECT_MODE
	ParamSkipTopologyDetection                            // CUFILE_PARAM_SKIP_TOPOLOGY_DETECTION
	ParamStreamMemopsBypass                               // CUFILE_PARAM_STREAM_MEMOPS_BYPASS
)

var boolParamNames = [...]string{
	"CUFILE_PARAM_PROPERTIES_USE_POLL_MODE",
	"CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE",
	"CUFILE_PARAM_FORCE_COMPAT_MODE",
	"CUFILE_PARAM_FS_MISC_API_CHECK_AGGRESSIVE",
	"CUFILE_PARAM_EXECUTION_PARALLEL_IO",
	"CUFILE_PARAM_PROFILE_NVTX",
	"CUFILE_PARAM_PROPERTIES_ALLOW_SYSTEM_MEMORY",
	"CUFILE_PARAM_USE_PCIP2PDMA",
	"CUFILE_PARAM_PREFER_IO_URING",
	"CUFILE_PARAM_FORCE_ODIRECT_MODE",
	"CUFILE_PARAM_SKIP_TOPOLOGY_DETECTION",
	"CUFILE_PARAM_STREAM_MEMOPS_BYPASS",
}

// String returns the C enumerator name.
func (p BoolParameter) String() string { return enumName(int(p), boolParamNames[:], "BoolParameter") }

// StringParameter names a string configuration parameter
// (CUFileStringConfigParameter_t).
type StringParameter int32

// The string parameters.
const (
	ParamLoggingLevel   StringParameter = iota // CUFILE_PARAM_LOGGING_LEVEL
	ParamEnvLogfilePath                        // CUFILE_PARAM_ENV_LOGFILE_PATH
	ParamLogDir                                // CUFILE_PARAM_LOG_DIR
)

var stringParamNames = [...]string{
	"CUFILE_PARAM_LOGGING_LEVEL",
	"CUFILE_PARAM_ENV_LOGFILE_PATH",
	"CUFILE_PARAM_LOG_DIR",
}

// String returns the C enumerator name.
func (p StringParameter) String() string {
	return enumName(int(p), stringParamNames[:], "StringParameter")
}

func enumName(v int, names []string, typ string) string {
	if v >= 0 && v < len(names) {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(v) + ")"
}

// GetParameterSizeT returns a numeric parameter (cuFileGetParameterSizeT):
// the value in use while the driver is open, else the value staged for
// the next DriverOpen.
func GetParameterSizeT(p SizeTParameter) (uint64, error) {
	var v uint64
	if err := callStatus(fnGetParameterSizeT, uintptr(p), uintptr(unsafe.Pointer(&v))); err != nil {
		return 0, err
	}
	return v, nil
}

// SetParameterSizeT stages a numeric parameter for the next DriverOpen
// (cuFileSetParameterSizeT); it fails with ErrDriverAlreadyOpen while the
// driver is open, that is, until DriverClose has balanced every open
// (UseCount 0). A value set here takes precedence over the environment and
// cufile.json. With cuFile 1.15, DriverGetProperties went on reporting the
// configured max_direct_io_size after a different value had been staged
// and the driver reopened.
func SetParameterSizeT(p SizeTParameter, v uint64) error {
	return callStatus(fnSetParameterSizeT, uintptr(p), uintptr(v))
}

// GetParameterMinMaxValue returns the range of values a numeric parameter
// accepts (cuFileGetParameterMinMaxValue).
func GetParameterMinMaxValue(p SizeTParameter) (lo, hi uint64, err error) {
	if err := callStatus(fnGetParameterMinMaxValue, uintptr(p), uintptr(unsafe.Pointer(&lo)), uintptr(unsafe.Pointer(&hi))); err != nil {
		return 0, 0, err
	}
	return lo, hi, nil
}

// GetParameterBool returns a boolean parameter (cuFileGetParameterBool),
// like GetParameterSizeT.
func GetParameterBool(p BoolParameter) (bool, error) {
	var v [8]byte // C bool is one byte; room to spare
	if err := callStatus(fnGetParameterBool, uintptr(p), uintptr(unsafe.Pointer(&v))); err != nil {
		return false, err
	}
	return v[0] != 0, nil
}

// SetParameterBool stages a boolean parameter (cuFileSetParameterBool),
// like SetParameterSizeT.
func SetParameterBool(p BoolParameter, v bool) error {
	var b uintptr
	if v {
		b = 1
	}
	return callStatus(fnSetParameterBool, uintptr(p), b)
}

// stringParamMax is the buffer GetParameterString offers the library.
const stringParamMax = 4096

// GetParameterString returns a string parameter
// (cuFileGetParameterString), like GetParameterSizeT.
func GetParameterString(p StringParameter) (string, error) {
	buf := make([]byte, stringParamMax)
	if err := callStatus(fnGetParameterString, uintptr(p), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf))); err != nil {
		return "", err
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf), nil
}

// SetParameterString stages a string parameter
// (cuFileSetParameterString), like SetParameterSizeT. v may not contain a
// NUL byte.
func SetParameterString(p StringParameter, v string) error {
	if strings.IndexByte(v, 0) >= 0 {
		return invalid("SetParameterString", "value contains a NUL byte")
	}
	b := append([]byte(v), 0)
	return callStatus(fnSetParameterString, uintptr(p), uintptr(unsafe.Pointer(&b[0])))
}

// SetParameterPosixPoolSlabArray stages the sizes (KiB) and counts of the
// host bounce-buffer slabs that compatibility mode uses
// (cuFileSetParameterPosixPoolSlabArray); the slices pair up and must have
// the same length. Call it before DriverOpen.
func SetParameterPosixPoolSlabArray(sizesKB, counts []uint64) error {
	if len(sizesKB) == 0 || len(sizesKB) != len(counts) || len(sizesKB) > 1<<31-1 {
		return invalid("SetParameterPosixPoolSlabArray", "lengths %d and %d", len(sizesKB), len(counts))
	}
	return callStatus(fnSetParameterPosixPoolSlabArray,
		uintptr(unsafe.Pointer(&sizesKB[0])), uintptr(unsafe.Pointer(&counts[0])), uintptr(len(sizesKB)))
}

// GetParameterPosixPoolSlabArray returns the n slab sizes (KiB) and counts
// of compatibility mode's host bounce-buffer pool
// (cuFileGetParameterPosixPoolSlabArray); n must equal the number of slabs
// configured.
func GetParameterPosixPoolSlabArray(n int) (sizesKB, counts []uint64, err error) {
	if n <= 0 || n > 1<<31-1 {
		return nil, nil, invalid("GetParameterPosixPoolSlabArray", "length %d", n)
	}
	sizesKB, counts = make([]uint64, n), make([]uint64, n)
	if err := callStatus(fnGetParameterPosixPoolSlabArray,
		uintptr(unsafe.Pointer(&sizesKB[0])), uintptr(unsafe.Pointer(&counts[0])), uintptr(n)); err != nil {
		return nil, nil, err
	}
	return sizesKB, counts, nil
}

// GetBARSizeInKB returns the BAR1 size, in KiB, of the GPU of index
// gpuIndex (cuFileGetBARSizeInKB). cufile.h's comment says MiB; the name,
// and the 268435456 an H200 reports (256 GiB if KiB), say KiB.
func GetBARSizeInKB(gpuIndex int) (uint64, error) {
	var v uint64
	if err := callStatus(fnGetBARSizeInKB, uintptr(int64(int32(gpuIndex))), uintptr(unsafe.Pointer(&v))); err != nil {
		return 0, err
	}
	return v, nil
}

// SetStatsLevel sets how much cuFile's statistics collect
// (cuFileSetStatsLevel): 0 nothing, 1 basic counters (StatsL1), 2 adds
// size histograms, 3 adds per-GPU figures. Set it before StatsStart.
func SetStatsLevel(level int) error {
	return callStatus(fnSetStatsLevel, uintptr(int64(int32(level))))
}

// GetStatsLevel returns the statistics level (cuFileGetStatsLevel).
func GetStatsLevel() (int, error) {
	var v int32
	if err := callStatus(fnGetStatsLevel, uintptr(unsafe.Pointer(&v))); err != nil {
		return 0, err
	}
	return int(v), nil
}

// StatsStart starts collecting statistics (cuFileStatsStart) at the level
// SetStatsLevel set, which must be above 0.
func StatsStart() error { return callStatus(fnStatsStart) }

// StatsStop stops collecting statistics (cuFileStatsStop); the counters
// keep their values.
func StatsStop() error { return callStatus(fnStatsStop) }

// StatsReset sets every statistics counter to zero (cuFileStatsReset).
func StatsReset() error { return callStatus(fnStatsReset) }

// OpCounter counts the successful and failed calls of one kind
// (CUfileOpCounter_t).
type OpCounter struct {
	OK  uint64
	Err uint64
}

// StatsL1 holds cuFile's level-1 statistics (CUfileStatsLevel1_t, the
// fields documented for cuFile 1.15, in their C order and layout). Rates
// are per second, latencies in microseconds.
type StatsL1 struct {
	ReadOps, WriteOps                            OpCounter
	HandleRegisterOps, HandleDeregisterOps       OpCounter
	BufRegisterOps, BufDeregisterOps             OpCounter
	ReadBytes, WriteBytes                        uint64
	ReadBWBytesPerSec, WriteBWBytesPerSec        uint64
	ReadLatAvgUs, WriteLatAvgUs                  uint64
	ReadOpsPerSec, WriteOpsPerSec                uint64
	ReadLatSumUs, WriteLatSumUs                  uint64
	BatchSubmitOps, BatchCompleteOps             OpCounter
	BatchSetupOps, BatchCancelOps                OpCounter
	BatchDestroyOps                              OpCounter
	BatchEnqueuedOps, BatchPosixEnqueuedOps      OpCounter
	BatchProcessedOps, BatchPosixProcessedOps    OpCounter
	BatchNVFSSubmitOps, BatchP2PSubmitOps        OpCounter
	BatchAIOSubmitOps, BatchIOURingSubmitOps     OpCounter
	BatchMixedIOSubmitOps, BatchTotalSubmitOps   OpCounter
	BatchReadBytes, BatchWriteBytes              uint64
	BatchReadBWBytes, BatchWriteBWBytes          uint64
	BatchSubmitLatAvgUs, BatchCompletionLatAvgUs uint64
	BatchSubmitOpsPerSec, BatchCompleteOpsPerSec uint64
	BatchSubmitLatSumUs, BatchCompletionLatSumUs uint64
	LastBatchReadBytes, LastBatchWriteBytes      uint64
}

// GetStatsL1 returns the level-1 statistics (cuFileGetStatsL1); the level
// must be 1 or more.
func GetStatsL1() (StatsL1, error) {
	// Later libraries append fields to the C structure: give it room.
	var buf struct {
		s     StatsL1
		spare [256]uint64
	}
	if err := callStatus(fnGetStatsL1, uintptr(unsafe.Pointer(&buf))); err != nil {
		return StatsL1{}, err
	}
	return buf.s, nil
}
