package display

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Special reports whether r is a character [Text] shows as ⟨U+XXXX⟩: one a
// reader could not see, or one that changes how the text around it reads.
//
// The set is the reviewer page's (server/web/assets/app.js, SPECIAL), so
// that the command line and the page mark the same characters: C0 controls
// but \t and \n, DEL and the C1 controls, U+00AD, U+034F, U+061C, the
// Hangul fillers U+115F, U+1160, U+3164 and U+FFA0, U+17B4 and U+17B5, the
// Mongolian U+180B–U+180F, U+200B–U+200F, U+2028–U+202E, U+2060–U+206F,
// U+FEFF, U+FFF9–U+FFFB, the TAG characters U+E0000–U+E007F, the
// variation selectors U+E0100–U+E01EF, and surrogates (which only a
// decoded JSON escape can give).
func Special(r rune) bool {
	switch {
	case r < 0x20:
		return r != '\t' && r != '\n'
	case r < 0x7f:
		return false
	case r <= 0x9f, r == 0xad, r == 0x34f, r == 0x61c, r == 0x115f, r == 0x1160,
		r == 0x17b4, r == 0x17b5, 0x180b <= r && r <= 0x180f:
		return true
	case r < 0x200b:
		return false
	case r <= 0x200f, 0x2028 <= r && r <= 0x202e, 0x2060 <= r && r <= 0x206f,
		r == 0x3164, 0xd800 <= r && r <= 0xdfff, r == 0xfeff, r == 0xffa0, 0xfff9 <= r && r <= 0xfffb,
		0xe0000 <= r && r <= 0xe007f, 0xe0100 <= r && r <= 0xe01ef:
		return true
	}
	return false
}

// badge is how a special character is shown.
func badge(r rune) string { return fmt.Sprintf("⟨U+%04X⟩", r) }

// byteBadge is how a byte of invalid UTF-8 is shown.
func byteBadge(b byte) string { return fmt.Sprintf("⟨0x%02X⟩", b) }

// Text returns s with every character a reader could not see, or that
// changes how the text around it reads, shown as ⟨U+XXXX⟩ (see [Special]),
// and each byte of invalid UTF-8 as ⟨0xNN⟩. Newlines and tabs stay as they
// are.
//
// Padding that would push the rest of the text out of view is counted
// instead of shown: a run of more than 16 blank characters (spaces, tabs
// and the other Unicode spaces, Zs) is shown as "⟨3000 spaces⟩" ("tabs",
// or "blanks" for any other or a mix), and more than 3 blank lines in
// a row (lines of blanks only) as one line "⟨200 blank lines⟩"
// ("⟨200 blank lines, CRLF⟩" when some end in \r\n). Text of plain
// printable text without such runs is that text.
func Text(s string) string { return escape(s, false) }

// Line is [Text] with newlines and tabs shown too (⟨U+000A⟩, ⟨U+0009⟩):
// the result is one line, for a table cell or a status line.
func Line(s string) string { return escape(s, true) }

const (
	// maxBlanks is the longest run of blank characters shown as it is.
	maxBlanks = 16
	// maxBlankLines is the most blank lines in a row shown as they are.
	maxBlankLines = 3
)

// blank reports whether r is a blank character: a space or a tab, or
// another character of Unicode's space separators (none is [Special]).
func blank(r rune) bool {
	return r == ' ' || r == '\t' || r >= 0x80 && unicode.Is(unicode.Zs, r)
}

// blankRun measures the run of blank characters at the start of s: how
// many, their length in bytes, and what to call them.
func blankRun(s string) (n, size int, what string) {
	var first rune
	what = "spaces"
	for size < len(s) {
		r, w := utf8.DecodeRuneInString(s[size:])
		if !blank(r) {
			break
		}
		switch {
		case n == 0:
			first = r
			if r == '\t' {
				what = "tabs"
			} else if r != ' ' {
				what = "blanks"
			}
		case r != first:
			what = "blanks"
		}
		n++
		size += w
	}
	return n, size, what
}

// blankLines counts the blank lines at the start of s (blanks only, each
// ending in \n or \r\n), and returns their length in bytes and whether
// one ends in \r\n.
func blankLines(s string) (n, size int, crlf bool) {
	cr := false
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\n':
			n, size, crlf = n+1, i+1, crlf || cr
			cr = false
		case r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			cr = true
		case !blank(r):
			return n, size, crlf
		}
		i += w
	}
	return n, size, crlf
}

// Hidden counts the characters [Special] marks and the bytes of invalid
// UTF-8: those [Text] shows as ⟨U+XXXX⟩ and ⟨0xNN⟩ (and the carriage
// returns of a run of blank lines it counts, "⟨N blank lines, CRLF⟩").
// Callers print a warning when it is not zero: the text holds something
// its reader would not otherwise have seen. Padding is not counted.
func Hidden(s string) int {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || Special(r) {
			n++
		}
		i += size
	}
	return n
}

func escape(s string, oneLine bool) string {
	if clean(s) {
		return s
	}
	newline := "\n"
	if oneLine {
		newline = badge('\n')
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if i == 0 || s[i-1] == '\n' {
			if n, size, crlf := blankLines(s[i:]); n > maxBlankLines {
				fmt.Fprintf(&b, "⟨%d blank lines", n)
				if crlf {
					b.WriteString(", CRLF")
				}
				b.WriteString("⟩" + newline)
				i += size
				continue
			}
		}
		if n, size, what := blankRun(s[i:]); n > maxBlanks {
			fmt.Fprintf(&b, "⟨%d %s⟩", n, what)
			i += size
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(byteBadge(s[i]))
		case Special(r), oneLine && (r == '\n' || r == '\t'):
			b.WriteString(badge(r))
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// clean reports whether s is printable ASCII with no run of more than
// maxBlanks spaces: [Text] and [Line] of it are s.
func clean(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f {
			return false
		}
		if c != ' ' {
			run = 0
		} else if run++; run > maxBlanks {
			return false
		}
	}
	return true
}
