package pickle

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"reflect"
	"strconv"
	"testing"
)

// canon is make_cases.py's canonical form of a decoded value, as JSON
// decodes it.
func canon(t *testing.T, v any) any {
	switch v := v.(type) {
	case nil, bool:
		return v
	case int64:
		return map[string]any{"int": strconv.FormatInt(v, 10)}
	case Long:
		n := new(big.Int)
		be := make([]byte, len(v))
		for i, b := range v {
			be[len(v)-1-i] = b
		}
		n.SetBytes(be)
		if v[len(v)-1]&0x80 != 0 {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(v))))
		}
		return map[string]any{"int": n.String()}
	case float64:
		return map[string]any{"float": fmt.Sprintf("%016x", math.Float64bits(v))}
	case string:
		return map[string]any{"str": v}
	case Bytes:
		return map[string]any{"bytes": hex.EncodeToString(v)}
	case Tuple:
		return map[string]any{"tuple": canonAll(t, v)}
	case *List:
		return map[string]any{"list": canonAll(t, v.Items)}
	case *Set:
		return map[string]any{"set": canonAll(t, v.Items)}
	case *Object:
		// Protocol 2 pickles bytes, bytearrays and sets as calls.
		g, _ := v.Callable.(Global)
		if g.Module == "builtins" {
			g.Module = "__builtin__"
		}
		switch {
		case g == Global{"_codecs", "encode"} && len(v.Args) == 2 && v.Args[1] == "latin1":
			var b []byte
			for _, r := range v.Args[0].(string) {
				b = append(b, byte(r))
			}
			return map[string]any{"bytes": hex.EncodeToString(b)}
		case g == Global{"__builtin__", "bytes"} && len(v.Args) == 0: // b""
			return map[string]any{"bytes": ""}
		case g == Global{"__builtin__", "bytearray"} && len(v.Args) == 1:
			return canon(t, v.Args[0])
		case (g == Global{"__builtin__", "set"} || g == Global{"__builtin__", "frozenset"}) && len(v.Args) == 1:
			return map[string]any{"set": canonAll(t, v.Args[0].(*List).Items)}
		}
	case *Dict:
		kv := []any{}
		for i := range v.Keys {
			kv = append(kv, []any{canon(t, v.Keys[i]), canon(t, v.Values[i])})
		}
		return map[string]any{"dict": kv}
	}
	t.Fatalf("no canonical form for %#v", v)
	return nil
}

func canonAll(t *testing.T, vs []any) []any {
	out := []any{}
	for _, v := range vs {
		out = append(out, canon(t, v))
	}
	return out
}

// TestPythonPickles decodes what Python's pickle wrote at protocols 2 to
// 5 (testdata/cases.jsonl, by make_cases.py) of None, bools, integers of
// every width (past 64 bits too), floats, strings, bytes, tuples, lists
// (in APPENDS batches), dicts, sets and shared references, and compares
// each with its canonical form.
func TestPythonPickles(t *testing.T) {
	n := 0
	for _, c := range pythonCases(t) {
		b, _ := hex.DecodeString(c.Pickle)
		v, err := Decode(b, nil)
		if err != nil {
			t.Errorf("protocol %d, %.60s: %v", c.Protocol, c.Pickle, err)
			continue
		}
		if got := canon(t, v); !reflect.DeepEqual(got, c.Want) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(c.Want)
			t.Errorf("protocol %d: got %.200s, want %.200s", c.Protocol, g, w)
		}
		n++
	}
	if n < 200 {
		t.Fatalf("%d cases", n)
	}
}

// TestObjects decodes an OrderedDict with state, holding a tensor as
// torch.save pickles one (a call of torch._utils._rebuild_tensor_v2 on a
// persistent storage ID), at protocols 2 and 4: calls are recorded, not
// made, and the persistent ID goes to the hook.
func TestObjects(t *testing.T) {
	for _, name := range []string{"object-p2.pickle", "object-p4.pickle"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		var pids []any
		v, err := Decode(b, func(pid any) (any, error) { pids = append(pids, pid); return "storage!", nil })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		od, ok := v.(*Object)
		if !ok || od.Callable != (Global{"collections", "OrderedDict"}) || len(od.Keys) != 2 || od.Keys[0] != "w" || od.Values[1] != int64(5) {
			t.Fatalf("%s: %#v", name, v)
		}
		if st, ok := od.State.(*Dict); !ok || st.Keys[0] != "_metadata" {
			t.Errorf("%s: state %#v", name, od.State)
		}
		w, ok := od.Values[0].(*Object)
		if !ok || w.Callable != (Global{"torch._utils", "_rebuild_tensor_v2"}) || len(w.Args) != 6 {
			t.Fatalf("%s: the tensor is %#v", name, od.Values[0])
		}
		if w.Args[0] != "storage!" || w.Args[1] != int64(0) || !reflect.DeepEqual(w.Args[2], Tuple{int64(2), int64(3)}) || w.Args[4] != false {
			t.Errorf("%s: arguments %#v", name, w.Args)
		}
		want := Tuple{"storage", Global{"collections", "OrderedDict"}, "0", "cpu", int64(6)}
		if len(pids) != 1 || !reflect.DeepEqual(pids[0], want) {
			t.Errorf("%s: persistent IDs %#v", name, pids)
		}
		if _, err := Decode(b, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s without a hook: %v", name, err)
		}
		hookErr := errors.New("no storages here")
		if _, err := Decode(b, func(any) (any, error) { return nil, hookErr }); !errors.Is(err, hookErr) {
			t.Errorf("%s, the hook failing: %v", name, err)
		}
	}
}

// TestRefuses: every cut of a valid pickle, lengths past the end (no
// allocation of what they claim), memo keys never stored, STOP with
// objects or marks left, unsupported opcodes and protocols, calls of
// what is not a tuple, BUILD on a list: each an error, ErrInvalid or
// ErrUnsupported.
func TestRefuses(t *testing.T) {
	good, err := os.ReadFile("testdata/object-p2.pickle")
	if err != nil {
		t.Fatal(err)
	}
	pid := func(any) (any, error) { return nil, nil }
	for n := range len(good) {
		if _, err := Decode(good[:n], pid); !errors.Is(err, ErrInvalid) {
			t.Errorf("cut at %d: %v", n, err)
		}
	}
	cases := map[string]struct {
		b    string
		want error
	}{
		"huge unicode":    {"\x80\x02X\xff\xff\xff\x7f.", ErrInvalid},
		"huge bytes8":     {"\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\x7f.", ErrInvalid},
		"huge frame":      {"\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xffN.", ErrInvalid},
		"huge long4":      {"\x80\x02\x8b\xff\xff\xff\x7f.", ErrInvalid},
		"memo miss":       {"\x80\x02h\x05.", ErrInvalid},
		"two left":        {"\x80\x02NN.", ErrInvalid},
		"mark left":       {"\x80\x02(N.", ErrInvalid},
		"empty stop":      {"\x80\x02.", ErrInvalid},
		"no stop":         {"\x80\x02N", ErrInvalid},
		"pop empty":       {"\x80\x020N.", ErrInvalid},
		"tuple3 of one":   {"\x80\x02N\x87.", ErrInvalid},
		"no mark":         {"\x80\x02Nt.", ErrInvalid},
		"reduce a list":   {"\x80\x02cos\nsystem\n]R.", ErrInvalid},
		"build a list":    {"\x80\x02]Nb.", ErrInvalid},
		"append to int":   {"\x80\x02K\x01Na.", ErrInvalid},
		"odd setitems":    {"\x80\x02}(Nu.", ErrInvalid},
		"global no eol":   {"\x80\x02cos", ErrInvalid},
		"stack global":    {"\x80\x04K\x01K\x02\x93.", ErrInvalid},
		"below the mark":  {"\x80\x02N(0.", nil},
		"protocol 6":      {"\x80\x06N.", ErrUnsupported},
		"text int":        {"I12\n.", ErrUnsupported},
		"ext1":            {"\x80\x02\x82\x01.", ErrUnsupported},
		"next buffer":     {"\x80\x05\x97.", ErrUnsupported},
		"long global":     {"\x80\x02c" + string(make([]byte, 5000)) + "\n", ErrInvalid},
		"not utf-8 line":  {"\x80\x02c\xff\nx\n.", ErrInvalid},
		"build on marked": {"\x80\x02cm\nf\n)R(Nb.", ErrInvalid},
	}
	for name, c := range cases {
		v, err := Decode([]byte(c.b), pid)
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v", name, err)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%s: %v (%#v), want %v", name, err, v, c.want)
		}
	}
}

// TestCycles: a list holding itself, and a tuple of one list twice: one
// object each, shared as the memo shares it.
func TestCycles(t *testing.T) {
	// l = []; l.append(l) at protocol 2: EMPTY_LIST, BINPUT 0, BINGET 0,
	// APPEND, STOP.
	v, err := Decode([]byte("\x80\x02]q\x00h\x00a."), nil)
	l, ok := v.(*List)
	if err != nil || !ok || len(l.Items) != 1 || l.Items[0] != l {
		t.Fatalf("%#v, %v", v, err)
	}
	v, err = Decode([]byte("\x80\x02]q\x00h\x00\x86."), nil)
	tu, ok := v.(Tuple)
	if err != nil || !ok || len(tu) != 2 || tu[0] != tu[1] {
		t.Fatalf("%#v, %v", v, err)
	}
}

// FuzzDecode: any bytes decode to a value or an error, never a panic.
func FuzzDecode(f *testing.F) {
	for _, name := range []string{"object-p2.pickle", "object-p4.pickle"} {
		b, _ := os.ReadFile("testdata/" + name)
		f.Add(b)
	}
	f.Add([]byte("\x80\x02]q\x00h\x00a."))
	f.Add([]byte("\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01a\x94K\x01u."))
	f.Fuzz(func(t *testing.T, b []byte) {
		Decode(b, func(pid any) (any, error) { return pid, nil })
	})
}

// pyCase is a line of testdata/cases.jsonl: a pickle Python wrote, at a
// protocol, and the value it holds.
type pyCase struct {
	Protocol int
	Pickle   string
	Want     any
}

// pythonCases reads testdata/cases.jsonl.
func pythonCases(t *testing.T) []pyCase {
	f, err := os.Open("testdata/cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var cases []pyCase
	for sc.Scan() {
		var c pyCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
	}
	return cases
}

// TestDecodePrefix decodes Python's pickles one after another from one
// stream, as the legacy torch.save format writes them: each value as
// Decode gives it, each length its own, the stream's end after the last.
func TestDecodePrefix(t *testing.T) {
	var stream []byte
	var lens []int
	for _, c := range pythonCases(t)[:50] {
		b, _ := hex.DecodeString(c.Pickle)
		stream = append(stream, b...)
		lens = append(lens, len(b))
	}
	at := 0
	for i, n := range lens {
		v, used, err := DecodePrefix(stream[at:], nil)
		want, werr := Decode(stream[at:at+n], nil)
		if err != nil || werr != nil || used != n || !reflect.DeepEqual(canon(t, v), canon(t, want)) {
			t.Fatalf("pickle %d: %d bytes used of %d, %v, %v", i, used, n, err, werr)
		}
		at += used
	}
	if at != len(stream) {
		t.Fatalf("%d bytes of %d decoded", at, len(stream))
	}
	if _, _, err := DecodePrefix(stream[:lens[0]-1], nil); err == nil {
		t.Fatal("a pickle cut before its STOP decoded")
	}
}
