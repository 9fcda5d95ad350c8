package display

import (
	"strings"
	"testing"
)

// hostile is a shell command a reviewer must read exactly: the >> is the
// point of the review, the rest hides or reorders text.
const hostile = "echo \"<script>\" >> /etc/passwd # \u202eevil\u202c \u200b \x1b[31m"

func TestText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, text, line string
		hidden               int
	}{
		{"empty", "", "", "", 0},
		{"plain", "ls -la /tmp && echo ok", "ls -la /tmp && echo ok", "ls -la /tmp && echo ok", 0},
		{"html is not escaped", `a <b> & "c" >> d`, `a <b> & "c" >> d`, `a <b> & "c" >> d`, 0},
		{"hostile", hostile,
			`echo "<script>" >> /etc/passwd # ⟨U+202E⟩evil⟨U+202C⟩ ⟨U+200B⟩ ⟨U+001B⟩[31m`,
			`echo "<script>" >> /etc/passwd # ⟨U+202E⟩evil⟨U+202C⟩ ⟨U+200B⟩ ⟨U+001B⟩[31m`, 4},
		{"newline and tab kept by Text only", "a\tb\nc", "a\tb\nc", "a⟨U+0009⟩b⟨U+000A⟩c", 0},
		{"carriage return overwrites a line", "safe\rrm -rf ~", "safe⟨U+000D⟩rm -rf ~", "safe⟨U+000D⟩rm -rf ~", 1},
		{"NUL, DEL and C1", "a\x00b\x7fc\u0085d\u009be", "a⟨U+0000⟩b⟨U+007F⟩c⟨U+0085⟩d⟨U+009B⟩e", "a⟨U+0000⟩b⟨U+007F⟩c⟨U+0085⟩d⟨U+009B⟩e", 4},
		{"invalid UTF-8", "a\xffb\xc3", "a⟨0xFF⟩b⟨0xC3⟩", "a⟨0xFF⟩b⟨0xC3⟩", 2},
		{"encoded surrogate is invalid UTF-8", "\xed\xa0\x80", "⟨0xED⟩⟨0xA0⟩⟨0x80⟩", "⟨0xED⟩⟨0xA0⟩⟨0x80⟩", 3},
		{"replacement character is visible", "\ufffd", "\ufffd", "\ufffd", 0},
		{"bidi isolates and marks", "\u2066x\u2069\u200e\u200f\u061c", "⟨U+2066⟩x⟨U+2069⟩⟨U+200E⟩⟨U+200F⟩⟨U+061C⟩", "⟨U+2066⟩x⟨U+2069⟩⟨U+200E⟩⟨U+200F⟩⟨U+061C⟩", 5},
		{"zero width and BOM", "r\u200dm\u2060\ufeff\u00ad", "r⟨U+200D⟩m⟨U+2060⟩⟨U+FEFF⟩⟨U+00AD⟩", "r⟨U+200D⟩m⟨U+2060⟩⟨U+FEFF⟩⟨U+00AD⟩", 4},
		{"line separators", "a\u2028b\u2029c", "a⟨U+2028⟩b⟨U+2029⟩c", "a⟨U+2028⟩b⟨U+2029⟩c", 2},
		{"TAG characters", "hi\U000E0041\U000E007F", "hi⟨U+E0041⟩⟨U+E007F⟩", "hi⟨U+E0041⟩⟨U+E007F⟩", 2},
		{"variation selectors 17-256", "x\U000E0100\U000E01EF", "x⟨U+E0100⟩⟨U+E01EF⟩", "x⟨U+E0100⟩⟨U+E01EF⟩", 2},
		{"fillers", "\u115f\u1160\u3164\uffa0\u17b4\u180e\u034f\ufff9", "⟨U+115F⟩⟨U+1160⟩⟨U+3164⟩⟨U+FFA0⟩⟨U+17B4⟩⟨U+180E⟩⟨U+034F⟩⟨U+FFF9⟩", "⟨U+115F⟩⟨U+1160⟩⟨U+3164⟩⟨U+FFA0⟩⟨U+17B4⟩⟨U+180E⟩⟨U+034F⟩⟨U+FFF9⟩", 8},
		{"visible non-ASCII untouched", "café ✓ 日本 😀 \u05d0 \U000E01F0", "café ✓ 日本 😀 \u05d0 \U000E01F0", "café ✓ 日本 😀 \u05d0 \U000E01F0", 0},

		// Padding that would push the rest off the screen is counted.
		{"3000 spaces", "echo safe" + strings.Repeat(" ", 3000) + "; rm -rf ~", "echo safe⟨3000 spaces⟩; rm -rf ~", "echo safe⟨3000 spaces⟩; rm -rf ~", 0},
		{"16 spaces stay", "a" + strings.Repeat(" ", 16) + "b", "a" + strings.Repeat(" ", 16) + "b", "a" + strings.Repeat(" ", 16) + "b", 0},
		{"17 spaces", "a" + strings.Repeat(" ", 17) + "b", "a⟨17 spaces⟩b", "a⟨17 spaces⟩b", 0},
		{"spaces at the end", "ls" + strings.Repeat(" ", 40), "ls⟨40 spaces⟩", "ls⟨40 spaces⟩", 0},
		{"tabs", "a" + strings.Repeat("\t", 20) + "b", "a⟨20 tabs⟩b", "a⟨20 tabs⟩b", 0},
		{"spaces and tabs", strings.Repeat(" \t", 10) + "x", "⟨20 blanks⟩x", "⟨20 blanks⟩x", 0},
		{"other blank characters", "a" + strings.Repeat("\u00a0", 10) + strings.Repeat("\u3000 ", 5) + "b", "a⟨20 blanks⟩b", "a⟨20 blanks⟩b", 0},
		{"a few tabs stay tabs", "a\t\tb", "a\t\tb", "a⟨U+0009⟩⟨U+0009⟩b", 0},
		{"200 blank lines", "ls\n" + strings.Repeat("\n", 200) + "rm -rf ~\n", "ls\n⟨200 blank lines⟩\nrm -rf ~\n",
			"ls⟨U+000A⟩⟨200 blank lines⟩⟨U+000A⟩rm -rf ~⟨U+000A⟩", 0},
		{"3 blank lines stay", "a\n\n\n\nb", "a\n\n\n\nb", "a⟨U+000A⟩⟨U+000A⟩⟨U+000A⟩⟨U+000A⟩b", 0},
		{"4 blank lines", "a\n\n\n\n\nb", "a\n⟨4 blank lines⟩\nb", "a⟨U+000A⟩⟨4 blank lines⟩⟨U+000A⟩b", 0},
		{"blank lines of blanks", "a\n  \n\t\n" + strings.Repeat(" ", 100) + "\n \nb", "a\n⟨4 blank lines⟩\nb", "a⟨U+000A⟩⟨4 blank lines⟩⟨U+000A⟩b", 0},
		{"blank lines at the start", "\n\n\n\n\nx", "⟨5 blank lines⟩\nx", "⟨5 blank lines⟩⟨U+000A⟩x", 0},
		{"blank lines at the end", "x\n\n\n\n\n", "x\n⟨4 blank lines⟩\n", "x⟨U+000A⟩⟨4 blank lines⟩⟨U+000A⟩", 0},
		{"blank CRLF lines", "a\r\n" + strings.Repeat("\r\n", 5) + "b", "a⟨U+000D⟩\n⟨5 blank lines, CRLF⟩\nb", "a⟨U+000D⟩⟨U+000A⟩⟨5 blank lines, CRLF⟩⟨U+000A⟩b", 6},
		{"a line of spaces and text is not blank", "a\n\n\n" + strings.Repeat(" ", 20) + "x\n\nb", "a\n\n\n⟨20 spaces⟩x\n\nb", "a⟨U+000A⟩⟨U+000A⟩⟨U+000A⟩⟨20 spaces⟩x⟨U+000A⟩⟨U+000A⟩b", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Text(tt.in); got != tt.text {
				t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.text)
			}
			if got := Line(tt.in); got != tt.line {
				t.Errorf("Line(%q) = %q, want %q", tt.in, got, tt.line)
			}
			if got := Hidden(tt.in); got != tt.hidden {
				t.Errorf("Hidden(%q) = %d, want %d", tt.in, got, tt.hidden)
			}
		})
	}
}

// TestSpecialMatchesPage checks Special against the reviewer page's
// SPECIAL, read from app.js, for every code point, so that the two cannot
// drift apart.
func TestSpecialMatchesPage(t *testing.T) {
	t.Parallel()
	want := pageSpecial(t)
	for r := rune(0); r <= 0x10ffff; r++ {
		if got := Special(r); got != want(r) {
			t.Errorf("Special(U+%04X) = %v, the page says %v", r, got, !got)
		}
	}
}

func TestSpecialSetEdges(t *testing.T) {
	t.Parallel()
	for _, r := range []rune{'\t', '\n', ' ', '~', 0xa0, 0xac, 0xae, 0x200a, 0x2010, 0x2027, 0x202f, 0x205f, 0x2070,
		0xfe0f, 0xfff8, 0xfffc, 0xdffff, 0xe0080, 0xe00ff, 0xe01f0} {
		if Special(r) {
			t.Errorf("Special(U+%04X) = true, want false", r)
		}
	}
	for _, r := range []rune{0, '\r', 0x0b, 0x1f, 0x7f, 0x9f, 0xd800, 0xdfff, 0xe0000, 0xe007f, 0xe0100, 0xe01ef} {
		if !Special(r) {
			t.Errorf("Special(U+%04X) = false, want true", r)
		}
	}
}

func TestLineHasOneLine(t *testing.T) {
	t.Parallel()
	got := Line("a\nb\r\nc\td")
	if strings.ContainsAny(got, "\n\r\t") {
		t.Errorf("Line left a line break or tab: %q", got)
	}
}
