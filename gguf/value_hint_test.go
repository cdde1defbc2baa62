package gguf_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/gguf"
)

// A Go value of no GGUF type says which types are accepted, and for an
// int how to give it a size.
func TestSetNamesAcceptedTypes(t *testing.T) {
	var m gguf.Metadata
	err := m.Set("llama.context_length", 8192)
	if !errors.Is(err, gguf.ErrInvalidArgument) {
		t.Fatalf("Set of an int: %v", err)
	}
	for _, w := range []string{`"llama.context_length"`, "int is not a GGUF value type", "uint32(8192)", "uint8, int8", "float64, bool, string", "[]gguf.Value"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	err = m.Set("k", struct{}{})
	if !errors.Is(err, gguf.ErrInvalidArgument) || strings.Contains(err.Error(), "uint32(8192)") || !strings.Contains(err.Error(), "want one of") {
		t.Errorf("Set of a struct: %v", err)
	}
	if err := m.Set("llama.context_length", uint32(8192)); err != nil {
		t.Errorf("Set of a uint32: %v", err)
	}
}
