//go:build race

package zarr

// raceEnabled: under the race detector sync.Pool drops some of what it
// is given back, so tests of reuse skip their heap bounds.
const raceEnabled = true
