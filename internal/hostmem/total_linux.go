package hostmem

import "golang.org/x/sys/unix"

// total returns the machine's RAM and swap in bytes, 0 if unknown.
func total() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	unit := max(int64(si.Unit), 1)
	return (int64(si.Totalram) + int64(si.Totalswap)) * unit
}
