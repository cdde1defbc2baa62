package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestInfoTensorFiles lists the safetensors project's sample file and a
// NumPy-written .npy file, as text and JSON, and refuses an object array.
func TestInfoTensorFiles(t *testing.T) {
	st := filepath.Join("..", "..", "safetensors", "testdata", "samples", "overall.safetensors")
	r := runKvik(t, nil, "info", st).expect(t, exitOK)
	for _, want := range []string{"9 tensors", "metadata test = a", "U16", "F64", "[6]"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kvik info %s lacks %q:\n%s", st, want, r.stdout)
		}
	}
	var rep tensorFileInfo
	r = runKvik(t, nil, "info", "--json", st).expect(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, x := range rep.Tensors {
		sum += x.Bytes
	}
	if len(rep.Tensors) != 9 || rep.Bytes != 168 || sum != 168 || rep.Tensors[1].Name != "H" || rep.Tensors[1].Dtype != "U16" {
		t.Errorf("JSON report %+v", rep)
	}
	np := filepath.Join("..", "..", "npy", "testdata", "v2.npy")
	r = runKvik(t, nil, "info", np).expect(t, exitOK)
	if !strings.Contains(r.stdout, "npy 2.0") || !strings.Contains(r.stdout, "<i4") || !strings.Contains(r.stdout, "[6 1]") {
		t.Errorf("kvik info %s:\n%s", np, r.stdout)
	}
	r = runKvik(t, nil, "info", filepath.Join("..", "..", "npy", "testdata", "object.npy")).expect(t, exitFailure)
	if !strings.Contains(r.stderr, "object array") {
		t.Errorf("object array: %s", r.stderr)
	}
}
