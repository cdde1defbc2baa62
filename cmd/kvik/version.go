package main

import (
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
)

const versionDesc = `
Print kvik's module version, the VCS revision it was built from (and
whether the tree had local changes), the commit time and the Go version.
Also: kvik -version, kvik --version.`

func versionFlags(e *env) *flag.FlagSet {
	return newFlagSet(e, "version", "", versionDesc)
}

// runVersion implements kvik version.
func runVersion(e *env, args []string) error {
	pos, err := parseFlags(versionFlags(e), args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument (version takes no arguments)")
	}
	fmt.Fprintln(e.stdout, versionLine())
	return nil
}

// versionLine is kvik version's output, e.g. "kvik v0.0.0-20261125235335-
// 00bddf274863+dirty, revision 00bddf27... (modified), committed
// 2026-11-25T23:53:35Z, go1.26.8 linux/amd64": the module version as Go
// stamps it (devel where it has none), then the VCS revision where the
// build recorded one (go build -buildvcs=false, or a git worktree, does
// not).
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	return formatVersion(bi, ok)
}

// formatVersion is versionLine for the build information bi (ok false
// when there is none).
func formatVersion(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return fmt.Sprintf("kvik (no build information), %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	line := "kvik " + v
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		line += ", revision " + rev
		if modified == "true" {
			line += " (modified)"
		}
	}
	if at != "" {
		line += ", committed " + at
	}
	return line + fmt.Sprintf(", %s %s/%s", bi.GoVersion, runtime.GOOS, runtime.GOARCH)
}
