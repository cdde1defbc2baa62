//go:build !linux

package hostmem

// total is unknown here: only the size a slice can hold is checked.
func total() int64 { return 0 }
