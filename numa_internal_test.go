package kvik

import (
	"errors"
	"testing"
)

// TestNUMAPlacementSetting checks KVIK_NUMA_PLACEMENT's values and that
// SetDefaults turns the placer off and its restore on again.
func TestNUMAPlacementSetting(t *testing.T) {
	for in, want := range map[string]NUMAPlacement{"auto": NUMAAuto, " OFF ": NUMAOff, "Auto": NUMAAuto} {
		if got, err := ParseNUMAPlacement(in); got != want || err != nil {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "on", "node0", "1"} {
		if _, err := ParseNUMAPlacement(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%q: %v, want ErrInvalidArgument", bad, err)
		}
	}
	d := BuiltinDefaults()
	if d.NUMAPlacement != NUMAAuto || NUMAOff.String() != "off" {
		t.Fatalf("built-in %v", d.NUMAPlacement)
	}
	d.NUMAPlacement = 7
	if err := d.Validate(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("NUMAPlacement 7: %v", err)
	}
	restore, err := UpdateDefaults(func(d *Defaults) { d.NUMAPlacement = NUMAOff })
	if err != nil {
		t.Fatal(err)
	}
	if placer.Enabled() {
		t.Error("NUMAOff left the placer on")
	}
	restore()
	if !placer.Enabled() {
		t.Error("the restore left the placer off")
	}
}
