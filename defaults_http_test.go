package kvik

import (
	"errors"
	"reflect"
	"testing"
)

func TestParseHTTPStatusCodes(t *testing.T) {
	for in, want := range map[string][]int{
		"429,500,502,503,504": {429, 500, 502, 503, 504},
		" 503 , 404 ":         {404, 503},
		"999,100,100":         {100, 999},
	} {
		s, err := ParseHTTPStatusCodes(in)
		if err != nil || !reflect.DeepEqual(s.Codes(), want) {
			t.Errorf("ParseHTTPStatusCodes(%q) = %v, %v; want %v", in, s.Codes(), err, want)
		}
		if back, err := ParseHTTPStatusCodes(s.String()); err != nil || back != s {
			t.Errorf("%q does not round-trip: %v, %v", s.String(), back, err)
		}
	}
	for _, in := range []string{"", "50", "5000", "099", "+50", "-50", "503;429", "503,", "abc", "1e2"} {
		if _, err := ParseHTTPStatusCodes(in); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ParseHTTPStatusCodes(%q): %v, want ErrInvalidArgument", in, err)
		}
	}
	if s := NewHTTPStatusSet(42, 503, 1000); !s.Has(503) || s.Has(42) || s.Has(1000) || len(s.Codes()) != 1 {
		t.Errorf("NewHTTPStatusSet kept out-of-range codes: %v", s.Codes())
	}
	if d := BuiltinDefaults(); d.HTTPStatusCodes.String() != "429,500,502,503,504" || d.HTTPMaxAttempts != 3 || d.HTTPTimeout.Seconds() != 60 {
		t.Errorf("built-in HTTP defaults: %+v", d)
	}
}
