// Package pickle decodes Python pickles as data and runs nothing: a
// global is a Global, a call (REDUCE, NEWOBJ, OBJ, INST) an *Object that
// records the callable, its arguments and whatever state and items are
// later set on it, and a persistent ID what the caller's hook makes of
// it. It reads what Python writes at protocols 2 to 5 (torch.save's
// checkpoints are protocol 2) and the mark and memo opcodes of the older
// ones, and refuses the text forms of scalars and the extension
// registry. Every allocation is bounded by the bytes left in the input.
package pickle

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// ErrInvalid reports bytes that are not a well-formed pickle: a
// truncated opcode, a stack that does not hold what an opcode takes, a
// memo key never stored.
var ErrInvalid = errors.New("pickle: invalid pickle")

// ErrTruncated reports a pickle whose bytes end before its STOP; it
// matches ErrInvalid too. A reader of a stream of pickles may read on
// and decode again.
var ErrTruncated = fmt.Errorf("%w: cut short", ErrInvalid)

// ErrUnsupported reports an opcode this package does not decode (the
// text forms of numbers and strings, the extension registry, out-of-band
// buffers) or a protocol above 5.
var ErrUnsupported = errors.New("pickle: unsupported opcode")

// Global is a reference to a Python object by module and name (GLOBAL,
// STACK_GLOBAL), as the pickle names it: nothing is looked up.
type Global struct{ Module, Name string }

func (g Global) String() string { return g.Module + "." + g.Name }

// Tuple is a tuple.
type Tuple []any

// List is a list; a pointer, as the pickle may refer to it again.
type List struct{ Items []any }

// Dict is a dict: its keys and values in the order set.
type Dict struct{ Keys, Values []any }

// Set is a set or a frozenset.
type Set struct{ Items []any }

// Bytes is a bytes or bytearray object.
type Bytes []byte

// Long is an integer that does not fit int64: its bytes, little-endian
// two's complement, as LONG1 and LONG4 hold them.
type Long []byte

// Object is the result of a call the pickle asks for, not made: Callable
// (a Global, mostly) with Args and Kwargs, then the state BUILD gave it
// and the items APPEND and SETITEM added (a list's or a dict's subclass,
// an OrderedDict).
type Object struct {
	Callable     any
	Args         Tuple
	Kwargs       any
	State        any
	Items        []any
	Keys, Values []any
}

// Opcodes, as pickletools names them.
const (
	opMark            = '('
	opStop            = '.'
	opPop             = '0'
	opPopMark         = '1'
	opDup             = '2'
	opBinint          = 'J'
	opBinint1         = 'K'
	opBinint2         = 'M'
	opNone            = 'N'
	opPersid          = 'P'
	opBinpersid       = 'Q'
	opReduce          = 'R'
	opBinstring       = 'T'
	opShortBinstring  = 'U'
	opBinunicode      = 'X'
	opAppend          = 'a'
	opBuild           = 'b'
	opGlobal          = 'c'
	opDict            = 'd'
	opEmptyDict       = '}'
	opAppends         = 'e'
	opBinget          = 'h'
	opInst            = 'i'
	opLongBinget      = 'j'
	opList            = 'l'
	opEmptyList       = ']'
	opObj             = 'o'
	opBinput          = 'q'
	opLongBinput      = 'r'
	opSetitem         = 's'
	opTuple           = 't'
	opEmptyTuple      = ')'
	opSetitems        = 'u'
	opBinfloat        = 'G'
	opProto           = 0x80
	opNewobj          = 0x81
	opTuple1          = 0x85
	opTuple2          = 0x86
	opTuple3          = 0x87
	opNewtrue         = 0x88
	opNewfalse        = 0x89
	opLong1           = 0x8a
	opLong4           = 0x8b
	opBinbytes        = 'B'
	opShortBinbytes   = 'C'
	opShortBinunicode = 0x8c
	opBinunicode8     = 0x8d
	opBinbytes8       = 0x8e
	opEmptySet        = 0x8f
	opAdditems        = 0x90
	opFrozenset       = 0x91
	opNewobjEx        = 0x92
	opStackGlobal     = 0x93
	opMemoize         = 0x94
	opFrame           = 0x95
	opBytearray8      = 0x96
)

// width is the bytes of an opcode's argument, or of the length that
// precedes its data.
func width(op byte) int {
	switch op {
	case opBinint1, opLong1, opShortBinunicode, opShortBinstring, opShortBinbytes, opBinput, opBinget:
		return 1
	case opBinint2:
		return 2
	case opBinunicode8, opBinbytes8, opBytearray8:
		return 8
	}
	return 4 // BININT, LONG4, BINUNICODE, BINSTRING, BINBYTES, LONG_BINPUT, LONG_BINGET
}

// maxLine bounds a text line (a GLOBAL's module or name, a PERSID).
const maxLine = 4096

// Decode decodes the pickle b and returns the object it builds.
// persistent makes an object of a persistent ID (PERSID, BINPERSID:
// torch.save's storages); nil refuses them.
func Decode(b []byte, persistent func(pid any) (any, error)) (any, error) {
	v, _, err := DecodePrefix(b, persistent)
	return v, err
}

// DecodePrefix is Decode of the pickle at the start of b, which may go
// on past its STOP (a stream of pickles, as the legacy torch.save format
// writes): it returns the bytes the pickle took too.
func DecodePrefix(b []byte, persistent func(pid any) (any, error)) (v any, n int, err error) {
	d := &decoder{b: b, persistent: persistent, memo: map[uint64]any{}}
	if v, err = d.run(); err != nil {
		return nil, 0, err
	}
	return v, d.pos, nil
}

type decoder struct {
	b          []byte
	pos        int
	stack      []any
	marks      []int
	memo       map[uint64]any
	persistent func(any) (any, error)
}

func (d *decoder) errf(format string, a ...any) error {
	return fmt.Errorf("%w: %s at byte %d", ErrInvalid, fmt.Sprintf(format, a...), d.pos)
}

// short is errf for bytes that end too soon (ErrTruncated).
func (d *decoder) short(format string, a ...any) error {
	return fmt.Errorf("%w: %s at byte %d", ErrTruncated, fmt.Sprintf(format, a...), d.pos)
}

func (d *decoder) run() (any, error) {
	for d.pos < len(d.b) {
		op := d.b[d.pos]
		d.pos++
		if op == opStop {
			if len(d.marks) > 0 || len(d.stack) != 1 {
				return nil, d.errf("STOP with %d objects and %d marks left", len(d.stack), len(d.marks))
			}
			return d.stack[0], nil
		}
		if err := d.step(op); err != nil {
			return nil, err
		}
	}
	return nil, d.short("no STOP")
}

// step runs one opcode.
func (d *decoder) step(op byte) error {
	switch op {
	case opProto:
		v, err := d.uint(1)
		if err == nil && v > 5 {
			err = fmt.Errorf("%w: protocol %d", ErrUnsupported, v)
		}
		return err
	case opFrame:
		n, err := d.uint(8)
		if err == nil && n > uint64(len(d.b)-d.pos) {
			err = d.short("a frame of %d bytes past the end", n)
		}
		return err
	case opMark:
		d.marks = append(d.marks, len(d.stack))
	case opPop:
		if n := len(d.marks); n > 0 && d.marks[n-1] == len(d.stack) {
			d.marks = d.marks[:n-1]
			return nil
		}
		_, err := d.pop()
		return err
	case opPopMark:
		_, err := d.popMark()
		return err
	case opDup:
		v, err := d.top()
		if err == nil {
			d.push(v)
		}
		return err
	case opNone:
		d.push(nil)
	case opNewtrue, opNewfalse:
		d.push(op == opNewtrue)
	case opBinint:
		v, err := d.uint(4)
		d.push(int64(int32(uint32(v))))
		return err
	case opBinint1, opBinint2:
		v, err := d.uint(width(op))
		d.push(int64(v))
		return err
	case opLong1, opLong4:
		return d.long(width(op))
	case opBinfloat:
		v, err := d.bytes(8)
		if err == nil {
			d.push(math.Float64frombits(binary.BigEndian.Uint64(v)))
		}
		return err
	case opShortBinunicode, opBinunicode, opBinunicode8, opShortBinstring, opBinstring:
		v, err := d.sized(width(op))
		if err == nil {
			d.push(string(v))
		}
		return err
	case opShortBinbytes, opBinbytes, opBinbytes8, opBytearray8:
		v, err := d.sized(width(op))
		if err == nil {
			d.push(Bytes(append([]byte(nil), v...)))
		}
		return err
	default:
		return d.structure(op)
	}
	return nil
}

// structure runs the opcodes that build containers, calls and memo
// entries.
func (d *decoder) structure(op byte) error {
	switch op {
	case opEmptyTuple:
		d.push(Tuple{})
	case opTuple1, opTuple2, opTuple3:
		k := int(op-opTuple1) + 1
		if len(d.stack)-d.floor() < k {
			return d.errf("a tuple of %d with %d objects on the stack", k, len(d.stack)-d.floor())
		}
		t := append(Tuple(nil), d.stack[len(d.stack)-k:]...)
		d.stack = d.stack[:len(d.stack)-k]
		d.push(t)
	case opTuple:
		items, err := d.popMark()
		if err == nil {
			d.push(Tuple(items))
		}
		return err
	case opEmptyList:
		d.push(&List{})
	case opList:
		items, err := d.popMark()
		if err == nil {
			d.push(&List{Items: items})
		}
		return err
	case opEmptyDict:
		d.push(&Dict{})
	case opDict:
		items, err := d.popMark()
		if err != nil {
			return err
		}
		m := &Dict{}
		d.push(m)
		return d.setItems(m, items)
	case opEmptySet:
		d.push(&Set{})
	case opFrozenset:
		items, err := d.popMark()
		if err == nil {
			d.push(&Set{Items: items})
		}
		return err
	case opAppend, opAppends, opSetitem, opSetitems, opAdditems:
		return d.add(op)
	case opGlobal:
		g, err := d.global()
		if err == nil {
			d.push(g)
		}
		return err
	case opStackGlobal:
		name, err1 := d.pop()
		module, err2 := d.pop()
		ms, ok1 := module.(string)
		ns, ok2 := name.(string)
		if err := errors.Join(err1, err2); err != nil || !ok1 || !ok2 {
			return d.errf("STACK_GLOBAL of %T and %T", module, name)
		}
		d.push(Global{ms, ns})
	case opReduce, opNewobj:
		args, err1 := d.pop()
		callable, err2 := d.pop()
		t, ok := args.(Tuple)
		if err := errors.Join(err1, err2); err != nil || !ok {
			return d.errf("a call with arguments %T", args)
		}
		d.push(&Object{Callable: callable, Args: t})
	case opNewobjEx:
		kwargs, err1 := d.pop()
		args, err2 := d.pop()
		cls, err3 := d.pop()
		t, ok := args.(Tuple)
		if err := errors.Join(err1, err2, err3); err != nil || !ok {
			return d.errf("NEWOBJ_EX with arguments %T", args)
		}
		d.push(&Object{Callable: cls, Args: t, Kwargs: kwargs})
	case opObj, opInst:
		return d.instance(op)
	case opBuild:
		state, err := d.pop()
		if err != nil {
			return err
		}
		v, err := d.top()
		o, ok := v.(*Object)
		if err != nil || !ok {
			return d.errf("BUILD on %T", v)
		}
		o.State = state
	case opBinpersid, opPersid:
		return d.persid(op)
	default:
		return d.memoOp(op)
	}
	return nil
}

// memoOp runs PUT, GET and MEMOIZE; anything else is unsupported.
func (d *decoder) memoOp(op byte) error {
	switch op {
	case opBinput, opLongBinput, opMemoize:
		k := uint64(len(d.memo))
		var err error
		if op != opMemoize {
			k, err = d.uint(width(op))
		}
		v, err2 := d.top()
		if err = errors.Join(err, err2); err == nil {
			d.memo[k] = v
		}
		return err
	case opBinget, opLongBinget:
		k, err := d.uint(width(op))
		if err != nil {
			return err
		}
		v, ok := d.memo[k]
		if !ok {
			return d.errf("memo key %d never stored", k)
		}
		d.push(v)
		return nil
	}
	return fmt.Errorf("%w: %#02x at byte %d", ErrUnsupported, op, d.pos-1)
}

// add runs APPEND(S), SETITEM(S) and ADDITEMS onto the object below
// what they add.
func (d *decoder) add(op byte) error {
	var items []any
	var err error
	switch op {
	case opAppend:
		var v any
		v, err = d.pop()
		items = []any{v}
	case opSetitem:
		var k, v any
		v, err = d.pop()
		if err == nil {
			k, err = d.pop()
		}
		items = []any{k, v}
	default:
		items, err = d.popMark()
	}
	if err != nil {
		return err
	}
	target, err := d.top()
	if err != nil {
		return err
	}
	switch t := target.(type) {
	case *List:
		if op == opAppend || op == opAppends {
			t.Items = append(t.Items, items...)
			return nil
		}
	case *Set:
		if op == opAdditems {
			t.Items = append(t.Items, items...)
			return nil
		}
	case *Dict:
		if op == opSetitem || op == opSetitems {
			return d.setItems(t, items)
		}
	case *Object:
		switch op {
		case opAppend, opAppends:
			t.Items = append(t.Items, items...)
			return nil
		case opSetitem, opSetitems:
			if len(items)%2 != 0 {
				return d.errf("an odd count of keys and values")
			}
			for i := 0; i < len(items); i += 2 {
				t.Keys, t.Values = append(t.Keys, items[i]), append(t.Values, items[i+1])
			}
			return nil
		}
	}
	return d.errf("%#02x onto %T", op, target)
}

func (d *decoder) setItems(m *Dict, items []any) error {
	if len(items)%2 != 0 {
		return d.errf("an odd count of keys and values")
	}
	for i := 0; i < len(items); i += 2 {
		m.Keys, m.Values = append(m.Keys, items[i]), append(m.Values, items[i+1])
	}
	return nil
}

// instance runs OBJ (the class first after the mark, its arguments
// after it) and INST (the class named in text, the arguments after the
// mark).
func (d *decoder) instance(op byte) error {
	var cls any
	if op == opInst {
		g, err := d.global()
		if err != nil {
			return err
		}
		cls = g
	}
	items, err := d.popMark()
	if err != nil {
		return err
	}
	if op == opObj {
		if len(items) == 0 {
			return d.errf("OBJ without a class")
		}
		cls, items = items[0], items[1:]
	}
	d.push(&Object{Callable: cls, Args: Tuple(items)})
	return nil
}

func (d *decoder) persid(op byte) error {
	var pid any
	var err error
	if op == opPersid {
		var line []byte
		if line, err = d.line(); err == nil {
			pid = string(line)
		}
	} else {
		pid, err = d.pop()
	}
	if err != nil {
		return err
	}
	if d.persistent == nil {
		return d.errf("a persistent ID, and no way to load one")
	}
	v, err := d.persistent(pid)
	if err != nil {
		return err
	}
	d.push(v)
	return nil
}

// global reads a GLOBAL's (or INST's) module and name, a line each.
func (d *decoder) global() (Global, error) {
	module, err := d.line()
	if err != nil {
		return Global{}, err
	}
	name, err := d.line()
	if err != nil {
		return Global{}, err
	}
	return Global{string(module), string(name)}, nil
}

func (d *decoder) line() ([]byte, error) {
	for i := d.pos; i < len(d.b) && i-d.pos <= maxLine; i++ {
		if d.b[i] == '\n' {
			l := d.b[d.pos:i]
			d.pos = i + 1
			if !utf8.Valid(l) {
				return nil, d.errf("a line that is not UTF-8")
			}
			return l, nil
		}
	}
	if len(d.b)-d.pos <= maxLine {
		return nil, d.short("no end of line")
	}
	return nil, d.errf("no end of line within %d bytes", maxLine)
}

// long reads a LONG1 or LONG4: a length of n bytes, then the integer.
func (d *decoder) long(n int) error {
	b, err := d.sized(n)
	if err != nil {
		return err
	}
	if len(b) > 8 {
		d.push(Long(append([]byte(nil), b...)))
		return nil
	}
	var v int64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | int64(b[i])
	}
	if len(b) > 0 && len(b) < 8 && b[len(b)-1]&0x80 != 0 {
		v -= 1 << (8 * len(b)) // sign-extend
	}
	d.push(v)
	return nil
}

// sized reads a length of n bytes (little-endian), then that many bytes.
func (d *decoder) sized(n int) ([]byte, error) {
	k, err := d.uint(n)
	if err != nil {
		return nil, err
	}
	if k > uint64(len(d.b)-d.pos) {
		return nil, d.short("%d bytes said to follow, %d left", k, len(d.b)-d.pos)
	}
	return d.bytes(int(k))
}

// uint reads an n-byte little-endian unsigned integer.
func (d *decoder) uint(n int) (uint64, error) {
	b, err := d.bytes(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, nil
}

func (d *decoder) bytes(n int) ([]byte, error) {
	if n > len(d.b)-d.pos {
		return nil, d.short("truncated")
	}
	b := d.b[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

func (d *decoder) push(v any) { d.stack = append(d.stack, v) }

// floor is where the objects above the last mark start.
func (d *decoder) floor() int {
	if n := len(d.marks); n > 0 {
		return d.marks[n-1]
	}
	return 0
}

func (d *decoder) pop() (any, error) {
	if len(d.stack) <= d.floor() {
		return nil, d.errf("an empty stack")
	}
	v := d.stack[len(d.stack)-1]
	d.stack = d.stack[:len(d.stack)-1]
	return v, nil
}

func (d *decoder) top() (any, error) {
	if len(d.stack) <= d.floor() {
		return nil, d.errf("an empty stack")
	}
	return d.stack[len(d.stack)-1], nil
}

// popMark pops the objects above the last mark, and the mark.
func (d *decoder) popMark() ([]any, error) {
	n := len(d.marks)
	if n == 0 {
		return nil, d.errf("no mark")
	}
	at := d.marks[n-1]
	d.marks = d.marks[:n-1]
	items := append([]any(nil), d.stack[at:]...)
	d.stack = d.stack[:at]
	return items, nil
}
