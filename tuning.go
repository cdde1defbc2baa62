package kvik

import "github.com/kvikgo/kvik/internal/staging"

// tuning holds the choices of the staging and scheduling paths that were
// settled by measurement (each field cites its figures) but that
// benchmarks still compare against their alternatives. It is one value,
// read where the choice is made: the benchmarks of this package
// (export_test.go, KVIK_BENCH_* variables) swap it whole to compare
// variants in one process, and nothing else in the library changes it.
type tuning struct {
	// alignTasks puts the boundaries of device tasks, and of their
	// staging chunks, on page boundaries of the file (deviceTasks): a
	// cold 2 GiB read at an unaligned offset ran 1.18-1.36x faster on an
	// H200.
	alignTasks bool
	// spreadDeviceReads spreads reads of fewer tasks than workers over all
	// workers (sched.Spread). Off: on an H100 a 16 MiB read on 16 workers
	// was faster as 4 pipelined tasks of 4 MiB than as 16 of 1 MiB
	// (docs/performance.md).
	spreadDeviceReads bool
	// minSpreadTask is the smallest task Spread makes: below it, the cost
	// of a task (a context push, a stream, two copies and syncs) outweighs
	// the parallelism.
	minSpreadTask int
	// reserveBounce allocates an operation's pinned bounce buffers as one
	// slab before its tasks start: one registration instead of one per
	// buffer, which made the first device operation of a process slow.
	reserveBounce bool
	// serialStaging reads each device task whole into one buffer, copies
	// it and waits, as KvikIO does, instead of overlapping chunks (slower
	// at every worker count measured; docs/performance.md).
	serialStaging bool
	// deviceBatch, above 1, is the most consecutive tasks of a large
	// cached device read that a worker takes at once (batchTasks).
	deviceBatch int
	// staging cuts tasks into pipeline chunks and says how their copies
	// are waited for (staging.Builtin).
	staging staging.Tuning
	// zc is the zero-copy lane's (zerocopy.go).
	zc zcTuning
	// remoteWaves, when positive, lets a remote read of n bytes into host
	// memory use tasks larger than TaskSize, about remoteWaves per worker,
	// so that a large read makes fewer requests, each of which costs the
	// server (and the client) a fixed amount. On the H200 with versitygw
	// on loopback, two per worker read a 1 GiB object 1.38x faster than
	// 4 MiB tasks, with a third less CPU on both ends
	// (docs/performance.md); 0 keeps TaskSize. Device reads keep TaskSize,
	// which also sizes their pinned bounce buffers.
	remoteWaves int
	// directQueueDepth is the number of O_DIRECT requests a read keeps in
	// flight, over all workers. With fewer workers than this, a task
	// splits its direct reads into concurrent requests: one synchronous
	// request at a time leaves the drive idle between requests (a
	// 1-worker host read reached 0.77x of 16 workers on the H200's virtio
	// disk).
	directQueueDepth int
	// minDirectPiece is the smallest request a split direct read makes.
	// (Four 256 KiB requests instead of the device path's one 1 MiB chunk
	// at one worker measured no better on the GPU machine's virtio disk.)
	minDirectPiece int
	// stagedSave writes a SaveFile's pieces through staged, page-aligned
	// tasks (savepieces.go); off, every piece is written by its own
	// PWrite or PWriteDevice, which benchmarks compare.
	stagedSave bool
}

// zcTuning is the zero-copy lane's part of tuning.
type zcTuning struct {
	on       bool // run a lane for reads that qualify
	all      bool // whatever the worker count, not only with one worker
	minBytes int  // smallest read that runs a lane
	piece    int  // bytes the lane maps and registers at once (64 MiB measured best of 8-128 MiB)
}

// builtinTuning is the measured choice of every field.
func builtinTuning() tuning {
	return tuning{
		alignTasks:       true,
		deviceBatch:      4,
		minSpreadTask:    1 << 20,
		reserveBounce:    true,
		staging:          staging.Builtin(),
		zc:               zcTuning{on: true, minBytes: 32 << 20, piece: 64 << 20},
		remoteWaves:      2,
		directQueueDepth: 4,
		minDirectPiece:   1 << 20,
		stagedSave:       true,
	}
}

// tune is the tuning in force: builtinTuning, except while a benchmark of
// this package compares variants.
var tune = builtinTuning()
