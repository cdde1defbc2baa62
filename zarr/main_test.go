package zarr

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them
// (decode workers, zstd streams).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
