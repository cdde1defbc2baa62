package main

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// display returns text from a file, a header or a server (a tensor name,
// a metadata key, an array's path) as kvik prints it: as it is when
// every character is printable, else quoted in Go's syntax
// (strconv.Quote), so that a hostile name cannot set the terminal's
// title, move the cursor, fake a table row or reverse the text after
// it, and an odd name is seen to be odd. An empty name, or one that
// starts with a quote, is quoted too.
func display(s string) string {
	if s == "" || strings.HasPrefix(s, `"`) || strings.ContainsFunc(s, unprintable) {
		return strconv.Quote(s)
	}
	return s
}

// unprintable reports whether r may not reach a terminal as it is: a
// control character (C0, DEL, C1), a format character (bidirectional
// overrides and isolates, zero-width characters), a line or paragraph
// separator, or a byte that is not UTF-8 (utf8.RuneError, as is U+FFFD
// itself, shown then as "\ufffd"'s glyph in quotes).
func unprintable(r rune) bool { return r == utf8.RuneError || !strconv.IsPrint(r) }

// escapeUnprintable returns s with each unprintable character escaped
// where it stands, as Go would quote it ("\x1b", "\u202e", "\xff"), for
// a message (an error) that may hold text from a file or a server that
// nobody quoted: it cannot drive the terminal either, and the rest of
// the message reads as it did.
func escapeUnprintable(s string) string {
	if !strings.ContainsFunc(s, unprintable) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if unprintable(r) {
			q := strconv.Quote(s[:n])
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}
