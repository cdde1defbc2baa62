// Package pylit parses the small subset of Python literals that NumPy
// writes into a .npy header: dicts, tuples, lists, quoted strings without
// escapes, non-negative integers, True and False (the header's dict, a
// structured dtype's descr list).
package pylit

import (
	"fmt"
	"strconv"
	"strings"
)

// Tuple is a parsed tuple; a list is []any.
type Tuple []any

// SyntaxError is a literal Parse refuses: what, and at which byte.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("at byte %d: %s", e.Offset, e.Msg) }

// Parse parses s, a literal followed by nothing but spaces: dicts as
// map[string]any, tuples as Tuple, lists as []any, strings, integers as
// int64, True and False as bool. It nests 16 deep at most.
func Parse(s string) (any, error) {
	p := &lit{s: s}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, p.errf("trailing text")
	}
	return v, nil
}

// Plain returns v, a parsed literal, with its tuples as []any.
func Plain(v any) any {
	switch x := v.(type) {
	case Tuple:
		return Plain([]any(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Plain(e)
		}
		return out
	}
	return v
}

// lit is a parser's state.
type lit struct {
	s     string
	i     int
	depth int
}

func (p *lit) errf(format string, a ...any) error {
	return &SyntaxError{Offset: p.i, Msg: fmt.Sprintf(format, a...)}
}

func (p *lit) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

func (p *lit) value() (any, error) {
	p.space()
	if p.i >= len(p.s) {
		return nil, p.errf("unexpected end")
	}
	if p.depth > 16 {
		return nil, p.errf("nested too deeply")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.dict()
	case c == '(' || c == '[':
		return p.seq(c)
	case c == '\'' || c == '"':
		return p.str()
	case c >= '0' && c <= '9':
		j := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		if p.i < len(p.s) && p.s[p.i] == 'L' { // Python 2 long
			defer func() { p.i++ }()
		}
		n, err := strconv.ParseInt(p.s[j:p.i], 10, 64)
		if err != nil {
			return nil, p.errf("integer %q out of range", p.s[j:p.i])
		}
		return n, nil
	case strings.HasPrefix(p.s[p.i:], "True"):
		p.i += 4
		return true, nil
	case strings.HasPrefix(p.s[p.i:], "False"):
		p.i += 5
		return false, nil
	}
	return nil, p.errf("unexpected %q", p.s[p.i])
}

func (p *lit) str() (string, error) {
	q := p.s[p.i]
	p.i++
	j := strings.IndexByte(p.s[p.i:], q)
	if j < 0 {
		return "", p.errf("unterminated string")
	}
	s := p.s[p.i : p.i+j]
	if strings.IndexByte(s, '\\') >= 0 {
		return "", p.errf("escapes are not supported")
	}
	p.i += j + 1
	return s, nil
}

// items parses comma-separated items up to close, allowing a trailing comma.
func (p *lit) items(close byte, item func() error) error {
	p.i++
	p.depth++
	defer func() { p.depth-- }()
	for {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == close {
			p.i++
			return nil
		}
		if err := item(); err != nil {
			return err
		}
		p.space()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == close {
			p.i++
			return nil
		}
		return p.errf("expected ',' or %q", close)
	}
}

func (p *lit) dict() (map[string]any, error) {
	d := map[string]any{}
	err := p.items('}', func() error {
		p.space()
		if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
			return p.errf("dict key is not a string")
		}
		k, err := p.str()
		if err != nil {
			return err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return p.errf("expected ':'")
		}
		p.i++
		v, err := p.value()
		if err != nil {
			return err
		}
		if _, dup := d[k]; dup {
			return p.errf("duplicate key %q", k)
		}
		d[k] = v
		return nil
	})
	return d, err
}

func (p *lit) seq(open byte) (any, error) {
	close := byte(')')
	if open == '[' {
		close = ']'
	}
	var out []any
	err := p.items(close, func() error {
		v, err := p.value()
		out = append(out, v)
		return err
	})
	if open == '(' {
		return Tuple(out), err
	}
	return out, err
}
