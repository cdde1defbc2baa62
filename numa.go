package kvik

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/kvikgo/kvik/internal/numa"
	"github.com/kvikgo/kvik/internal/staging"
)

// NUMAPlacement says whether each GPU's staging (the pinned bounce
// buffers of its device reads and writes, and the worker threads that
// fill and drain them) is placed on the GPU's NUMA node
// (docs/multi-gpu.md).
type NUMAPlacement int

const (
	// NUMAAuto places each GPU's staging on the GPU's node where the host
	// has two or more nodes with CPUs the process may use and sysfs
	// gives the GPU's node; elsewhere it does nothing. It is the default.
	NUMAAuto NUMAPlacement = iota
	// NUMAOff leaves threads and memory where the scheduler and the
	// kernel put them.
	NUMAOff
)

// numaPlacementEnv is the variable that sets NUMAPlacement; kvik's
// prefix, as KvikIO has no such setting.
const numaPlacementEnv = "KVIK_NUMA_PLACEMENT"

var numaPlacementNames = [...]string{NUMAAuto: "auto", NUMAOff: "off"}

// String returns "auto" or "off".
func (p NUMAPlacement) String() string {
	if p >= 0 && int(p) < len(numaPlacementNames) {
		return numaPlacementNames[p]
	}
	return fmt.Sprintf("NUMAPlacement(%d)", int(p))
}

// ParseNUMAPlacement parses "auto" or "off", case-insensitive, trimmed.
// Errors wrap ErrInvalidArgument.
func ParseNUMAPlacement(s string) (NUMAPlacement, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	for p, name := range numaPlacementNames {
		if v == name {
			return NUMAPlacement(p), nil
		}
	}
	return 0, fmt.Errorf("%w: NUMA placement %q (want auto or off)", ErrInvalidArgument, s)
}

// placer places each GPU's staging on its node: the device worker pools'
// threads (pools.go) and the pinned bounce pools' memory (bounce.go).
var placer = staging.Placer{OnChoice: logPlacement}

// logPlacement records, once per GPU, where its staging goes.
func logPlacement(busID string, c numa.Choice, placed bool, err error) {
	l := logAt(LevelDebug)
	if l == nil {
		return
	}
	attrs := []slog.Attr{slog.String("gpu", busID), slog.Int("node", c.Node), slog.Bool("placed", placed)}
	if placed {
		attrs = append(attrs, slog.String("cpus", numa.FormatCPUs(c.CPUs)))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	l.LogAttrs(context.Background(), LevelDebug, "kvik: NUMA placement", attrs...)
}
