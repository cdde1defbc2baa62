// Package realpath names a file by one path whatever its spelling, for
// the checks that two paths are one file or one inside the other, and
// for locks named by a path.
package realpath

import (
	"os"
	"path/filepath"
	"strings"
)

// Resolve returns p as an absolute path in which the part that exists
// has its symbolic links, "." and ".." resolved as the kernel resolves
// them (a ".." after a link climbs from the link's target), followed by
// the part that does not exist yet, cleaned. Two spellings of one file,
// whether it exists yet or not, resolve alike (bind mounts aside).
func Resolve(p string) string {
	if !filepath.IsAbs(p) {
		wd, err := os.Getwd()
		if err != nil {
			return filepath.Clean(p)
		}
		// Not filepath.Join, which would clean "link/.." lexically.
		p = wd + string(filepath.Separator) + p
	}
	head, tail := p, ""
	for {
		if r, err := filepath.EvalSymlinks(head); err == nil {
			return filepath.Join(r, tail)
		}
		i := strings.LastIndexByte(head, filepath.Separator)
		if i <= 0 {
			return filepath.Clean(p)
		}
		head, tail = head[:i], filepath.Join(head[i+1:], tail)
	}
}

// Within reports whether the file at inner is the one at outer or lies
// below it, both resolved.
func Within(outer, inner string) bool {
	o, i := Resolve(outer), Resolve(inner)
	return i == o || strings.HasPrefix(i, strings.TrimSuffix(o, string(filepath.Separator))+string(filepath.Separator))
}
