//go:build !race

package zarr

const raceEnabled = false
