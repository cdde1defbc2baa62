package kvik

import (
	"fmt"
	"os"
	"strings"
)

// ParseOpenFlags converts KvikIO's open flags to os.O_* flags: "r"
// (read), "r+" (read and write), "w" (write, create, truncate) and "w+"
// (read and write, create, truncate). A "b" anywhere after the first
// character is ignored, as in C's fopen.
func ParseOpenFlags(flags string) (int, error) {
	s := flags
	if len(s) > 1 {
		s = s[:1] + strings.ReplaceAll(s[1:], "b", "")
	}
	switch s {
	case "r":
		return os.O_RDONLY, nil
	case "r+":
		return os.O_RDWR, nil
	case "w":
		return os.O_WRONLY | os.O_CREATE | os.O_TRUNC, nil
	case "w+":
		return os.O_RDWR | os.O_CREATE | os.O_TRUNC, nil
	}
	return 0, fmt.Errorf("%w: open flags %q (want r, r+, w or w+)", ErrInvalidArgument, flags)
}
