package kvik

import (
	"errors"
	"strings"
	"testing"
)

func TestParseReadPolicy(t *testing.T) {
	for in, want := range map[string]ReadPolicy{"auto": ReadPolicyAuto, " Buffered ": ReadPolicyBuffered, "DIRECT": ReadPolicyDirect} {
		if got, err := ParseReadPolicy(in); err != nil || got != want {
			t.Errorf("ParseReadPolicy(%q) = %v, %v; want %v", in, got, err, want)
		}
		if got, _ := ParseReadPolicy(want.String()); got != want {
			t.Errorf("%v does not round-trip", want)
		}
	}
	for _, in := range []string{"", "on", "1", "residency", "direct-io"} {
		if _, err := ParseReadPolicy(in); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ParseReadPolicy(%q): err = %v, want ErrInvalidArgument", in, err)
		}
	}
	if s := ReadPolicy(7).String(); s != "ReadPolicy(7)" {
		t.Errorf("String of a bad policy: %q", s)
	}
	d := BuiltinDefaults()
	for _, p := range []ReadPolicy{-1, 3} {
		d.DirectIOReadPolicy = p
		if err := d.Validate(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Validate with policy %d: %v", p, err)
		}
	}
}

func TestReadPolicyFromEnv(t *testing.T) {
	const auto = "KVIKIO_AUTO_DIRECT_IO_READ"
	for _, c := range []struct {
		env     map[string]string
		want    ReadPolicy
		autoDIO bool
		source  string
	}{
		{nil, ReadPolicyAuto, false, "built-in"},
		{map[string]string{readPolicyEnv: "buffered"}, ReadPolicyBuffered, false, "env"},
		{map[string]string{readPolicyEnv: "direct"}, ReadPolicyDirect, false, "env"},
		{map[string]string{auto: "0"}, ReadPolicyBuffered, false, "env"}, // KvikIO's meaning: never
		{map[string]string{auto: "on"}, ReadPolicyDirect, true, "env"},   // always
		{map[string]string{auto: "no", readPolicyEnv: "buffered"}, ReadPolicyBuffered, false, "env"},
		{map[string]string{auto: "1", readPolicyEnv: "direct"}, ReadPolicyDirect, true, "env"},
	} {
		d, s, err := defaultsFrom(lookupIn(c.env))
		if err != nil || d.DirectIOReadPolicy != c.want || d.AutoDirectIORead != c.autoDIO || d.ReadPolicy() != c.want {
			t.Errorf("%v: policy %v (effective %v), AutoDirectIORead %v, %v; want %v", c.env, d.DirectIOReadPolicy, d.ReadPolicy(), d.AutoDirectIORead, err, c.want)
			continue
		}
		for _, x := range s {
			if x.Env == readPolicyEnv && (x.Source != c.source || x.Value != c.want.String()) {
				t.Errorf("%v: setting %+v, want source %s", c.env, x, c.source)
			}
		}
	}
	for _, env := range []map[string]string{
		{readPolicyEnv: "sometimes"},
		{readPolicyEnv: " "},
		{auto: "1", readPolicyEnv: "auto"},
		{auto: "0", readPolicyEnv: "direct"},
		{auto: "false", readPolicyEnv: "auto"},
	} {
		_, _, err := defaultsFrom(lookupIn(env))
		if !errors.Is(err, ErrBadEnv) || !strings.Contains(err.Error(), readPolicyEnv) {
			t.Errorf("%v: err = %v, want ErrBadEnv naming %s", env, err, readPolicyEnv)
		}
	}
	// AutoDirectIORead set from code forces direct reads, as before.
	d := BuiltinDefaults()
	d.AutoDirectIORead = true
	if d.ReadPolicy() != ReadPolicyDirect {
		t.Errorf("AutoDirectIORead: effective policy %v", d.ReadPolicy())
	}
}

func TestResidencySamples(t *testing.T) {
	for pages, want := range map[int]int{1: 1, 2: 2, 255: 2, 256: 2, 1024: 4, 1 << 14: 64, 1 << 20: 64} {
		if got := residencySamples(pages); got != want {
			t.Errorf("residencySamples(%d) = %d, want %d", pages, got, want)
		}
	}
}
