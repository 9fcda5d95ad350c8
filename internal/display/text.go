package display

import (
	"fmt"
	"strings"
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
// are. Text of plain printable text is that text.
func Text(s string) string { return escape(s, false) }

// Line is [Text] with newlines and tabs shown too (⟨U+000A⟩, ⟨U+0009⟩):
// the result is one line, for a table cell or a status line.
func Line(s string) string { return escape(s, true) }

// Hidden counts the characters (and bytes of invalid UTF-8) [Text] shows
// as ⟨…⟩. Callers print a warning when it is not zero: the text holds
// something its reader would not otherwise have seen.
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
	clean := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
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
