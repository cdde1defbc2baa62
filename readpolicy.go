package kvik

import (
	"fmt"
	"strings"
)

// ReadPolicy says how reads choose between buffered I/O (through the page
// cache) and O_DIRECT.
type ReadPolicy int

const (
	// ReadPolicyAuto reads what is in the page cache with buffered I/O and
	// what is not with O_DIRECT, checking residency once per task. It is
	// the default.
	ReadPolicyAuto ReadPolicy = iota
	// ReadPolicyBuffered always reads through the page cache (KvikIO's
	// default, KVIKIO_AUTO_DIRECT_IO_READ=false).
	ReadPolicyBuffered
	// ReadPolicyDirect always uses O_DIRECT for the page-aligned middle of
	// each task (KVIKIO_AUTO_DIRECT_IO_READ=true).
	ReadPolicyDirect
)

// readPolicyEnv is the variable that sets DirectIOReadPolicy. It has kvik's
// prefix, not KvikIO's: KvikIO has no such setting.
const readPolicyEnv = "KVIK_DIRECT_IO_READ_POLICY"

var readPolicyNames = [...]string{ReadPolicyAuto: "auto", ReadPolicyBuffered: "buffered", ReadPolicyDirect: "direct"}

// String returns "auto", "buffered" or "direct".
func (p ReadPolicy) String() string {
	if p >= 0 && int(p) < len(readPolicyNames) {
		return readPolicyNames[p]
	}
	return fmt.Sprintf("ReadPolicy(%d)", int(p))
}

// ParseReadPolicy parses "auto", "buffered" or "direct", case-insensitive,
// trimmed. Errors wrap ErrInvalidArgument.
func ParseReadPolicy(s string) (ReadPolicy, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	for p, name := range readPolicyNames {
		if v == name {
			return ReadPolicy(p), nil
		}
	}
	return 0, fmt.Errorf("%w: read policy %q (want auto, buffered or direct)", ErrInvalidArgument, s)
}

// ReadPolicy returns the policy reads follow under d: ReadPolicyDirect
// when AutoDirectIORead is set, DirectIOReadPolicy otherwise.
func (d Defaults) ReadPolicy() ReadPolicy {
	if d.AutoDirectIORead {
		return ReadPolicyDirect
	}
	return d.DirectIOReadPolicy
}

// resolveReadPolicy applies KVIKIO_AUTO_DIRECT_IO_READ, when the
// environment sets it, to the read policy: true means direct and false
// buffered, as in KvikIO. Setting both variables to disagreeing values is
// an error.
func resolveReadPolicy(d *Defaults, lookup func(string) (string, bool), fromEnv map[string]bool) error {
	if !fromEnv["AutoDirectIORead"] {
		return nil
	}
	want := ReadPolicyBuffered
	if d.AutoDirectIORead {
		want = ReadPolicyDirect
	}
	if fromEnv["DirectIOReadPolicy"] && d.DirectIOReadPolicy != want {
		auto, _ := lookup("KVIKIO_AUTO_DIRECT_IO_READ")
		pol, _ := lookup(readPolicyEnv)
		return fmt.Errorf("%w: KVIKIO_AUTO_DIRECT_IO_READ=%q and %s=%q conflict", ErrBadEnv, auto, readPolicyEnv, pol)
	}
	d.DirectIOReadPolicy = want
	fromEnv["DirectIOReadPolicy"] = true
	return nil
}
