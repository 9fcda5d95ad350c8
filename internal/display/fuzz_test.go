package display

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// visible fails t if s is not valid UTF-8 or holds a character Text
// marks.
func visible(t *testing.T, what, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("%s is not valid UTF-8: %q", what, s)
	}
	for _, r := range s {
		if Special(r) {
			t.Fatalf("%s left U+%04X: %q", what, r, s)
		}
	}
}

// padding matches what Text counts instead of showing: more than 16 blank
// characters in a row, or more than 3 blank lines.
var padding = regexp.MustCompile(`[\t\p{Zs}]{17}|(?:^|\n)(?:[\t\p{Zs}]*\r?\n){4}`)

func FuzzText(f *testing.F) {
	for _, s := range []string{"", "ls -la", hostile, "a\tb\nc\r\n", "\xff\xed\xa0\x80", "\U000E0041\U000E0100", "⟨U+202E⟩", "日本 😀",
		"a" + strings.Repeat(" ", 17) + "b", strings.Repeat(" \t\u00a0", 6), "a\n\n \n\r\n\t\nb", "\n\n\n\n", "x\n\n\n\n\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		text, line := Text(s), Line(s)
		visible(t, "Text", text)
		visible(t, "Line", line)
		if strings.ContainsAny(line, "\n\t") {
			t.Fatalf("Line left a newline or tab: %q", line)
		}
		plain := utf8.ValidString(s) && strings.IndexFunc(s, Special) < 0
		padded := padding.MatchString(s)
		if (plain && !padded) != (text == s) {
			t.Fatalf("Text(%q) = %q: identity must be exactly on plain text without padding (plain: %v, padded: %v)", s, text, plain, padded)
		}
		if padding.MatchString(text) {
			t.Fatalf("Text(%q) = %q is padded still", s, text)
		}
		if plain != (Hidden(s) == 0) {
			t.Fatalf("Hidden(%q) = %d, plain: %v", s, Hidden(s), plain)
		}
		if !strings.Contains(s, "⟨") && !padded {
			if n := strings.Count(text, "⟨"); n != Hidden(s) {
				t.Fatalf("Text(%q) shows %d characters, Hidden counts %d", s, n, Hidden(s))
			}
		}
		if Line(text) != line {
			t.Fatalf("Line(Text(s)) = %q, Line(s) = %q", Line(text), line)
		}
	})
}

func decodeAny(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", s, err)
	}
	return v
}

func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"cmd":"a \u003e\u003e b"}`, `["\ud800","\ud83d\ude00",1.50,null]`, "{\"a\":\"\xff\u202e\"}",
		`{"a":"\"\\\/\b\f\n\r\t"}`, `not json`, `{"a":`, `  [ ] `, `"\u2028"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := JSON(s)
		visible(t, "JSON", out)
		if !json.Valid([]byte(s)) {
			if out != Text(s) {
				t.Fatalf("JSON of invalid input %q = %q, want Text of it", s, out)
			}
			return
		}
		if !json.Valid([]byte(out)) {
			t.Fatalf("JSON(%q) = %q is not JSON", s, out)
		}
		if strings.ContainsAny(out, "\n\r\t") {
			t.Fatalf("JSON(%q) = %q is not one line", s, out)
		}
		ind := JSONIndent(s)
		visible(t, "JSONIndent", ind)
		var c bytes.Buffer
		if err := json.Compact(&c, []byte(ind)); err != nil || c.String() != out {
			t.Fatalf("JSONIndent(%q) = %q does not compact to JSON's %q (%v)", s, ind, out, err)
		}
		if !strings.Contains(s, "⟨") && strings.Count(out, "⟨") != HiddenJSON(s) {
			t.Fatalf("JSON(%q) = %q shows %d characters, HiddenJSON counts %d", s, out, strings.Count(out, "⟨"), HiddenJSON(s))
		}
		edit, ok := EditJSON(s)
		visible(t, "EditJSON", edit)
		if !ok || !json.Valid([]byte(edit)) {
			t.Fatalf("EditJSON(%q) = %q, %v: not JSON", s, edit, ok)
		}
		if a, b := decodeAny(t, s), decodeAny(t, edit); !reflect.DeepEqual(a, b) {
			t.Fatalf("EditJSON(%q) = %q reads as %#v, not %#v", s, edit, b, a)
		}
		if HiddenJSON(s) == 0 {
			// Nothing to mark: the same value, only shown without
			// escapes.
			if a, b := decodeAny(t, s), decodeAny(t, out); !reflect.DeepEqual(a, b) {
				t.Fatalf("JSON(%q) = %q reads as %#v, not %#v", s, out, b, a)
			}
		}
	})
}
