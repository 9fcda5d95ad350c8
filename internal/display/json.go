package display

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// JSON renders v as compact JSON for a person to read. v is a
// json.RawMessage, a []byte or a string holding JSON, or any other Go
// value (encoded first). Nothing is HTML-escaped: <, > and & read as they
// are, and \u003c-style escapes in stored JSON are undone. Inside strings
// (keys too) \n, \t, \" and \\ stay JSON escapes and every character
// [Text] would mark is shown as ⟨U+XXXX⟩, a lone surrogate escape as
// ⟨U+D800⟩ and a byte of invalid UTF-8 as ⟨0xNN⟩. Numbers are kept digit
// for digit. Input that is not JSON is shown as [Text] of it.
func JSON(v any) string {
	s, _ := compact(v)
	return s
}

// JSONIndent is [JSON] indented by two spaces, over several lines.
func JSONIndent(v any) string {
	s, ok := compact(v)
	if !ok {
		return s
	}
	var out bytes.Buffer
	if err := json.Indent(&out, []byte(s), "", "  "); err != nil {
		return s
	}
	return out.String()
}

// EditJSON is v as JSON for a person to edit (in $EDITOR, say), indented
// by two spaces: nothing HTML-escaped, strings as they are, except that
// each character [Text] would mark is written as a \u escape (the way the
// reviewer page fills its edit box), so the editor shows it and the edited
// text, if left alone, decodes to the same value. Numbers are kept digit
// for digit; a byte of invalid UTF-8, which JSON cannot hold, becomes
// \ufffd. The result is valid JSON, or "" with ok false when v is not
// JSON.
func EditJSON(v any) (s string, ok bool) {
	raw, ok := rawJSON(v)
	if !ok {
		return "", false
	}
	var b strings.Builder
	walkJSON(raw, &b, nil, true)
	var out bytes.Buffer
	if err := json.Indent(&out, []byte(b.String()), "", "  "); err != nil {
		return "", false
	}
	return out.String(), true
}

// compact is [JSON] of v, and whether v is JSON (else it is [Text] of it).
func compact(v any) (string, bool) {
	raw, ok := rawJSON(v)
	if !ok {
		return Text(string(raw)), false
	}
	var b strings.Builder
	walkJSON(raw, &b, nil, false)
	return b.String(), true
}

// HiddenJSON counts the characters of v's strings (keys and values) that
// [JSON] shows as ⟨…⟩; for input that is not JSON, [Hidden] of it. Use it
// for the warning line under JSON or [Args]: [Hidden] of JSON text misses
// a character written as a \u escape.
func HiddenJSON(v any) int {
	raw, ok := rawJSON(v)
	if !ok {
		return Hidden(string(raw))
	}
	n := 0
	walkJSON(raw, nil, &n, false)
	return n
}

// rawJSON returns v's JSON and whether it is valid; when it is not, the
// bytes to show as text.
func rawJSON(v any) ([]byte, bool) {
	var raw []byte
	switch v := v.(type) {
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	case string:
		raw = []byte(v)
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return []byte("(cannot be shown as JSON: " + err.Error() + ")"), false
		}
		raw = bytes.TrimRight(buf.Bytes(), "\n")
	}
	if !json.Valid(raw) {
		return raw, false
	}
	return raw, true
}

// walkJSON copies valid JSON without its white space, strings shown by
// showString, to b (when not nil), counting the characters it marks in n
// (when not nil). With edit, marked characters are written as \u escapes
// instead of ⟨U+XXXX⟩, so that the text decodes to the same value.
func walkJSON(raw []byte, b *strings.Builder, n *int, edit bool) {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			i = showString(raw, i, b, n, edit)
		default:
			if b != nil {
				b.WriteByte(c)
			}
			i++
		}
	}
}

// showString shows the JSON string starting at raw[i] (its opening quote)
// and returns the index after its closing quote. raw is valid JSON.
func showString(raw []byte, i int, b *strings.Builder, n *int, edit bool) int {
	put := func(s string) {
		if b != nil {
			b.WriteString(s)
		}
	}
	mark := func(s string) {
		put(s)
		if n != nil {
			*n++
		}
	}
	showRune, showByte := badge, byteBadge
	if edit {
		showRune, showByte = escapeRune, func(byte) string { return `\ufffd` } // JSON cannot hold the byte
	}
	putRune := func(r rune) {
		switch {
		case r == '"':
			put(`\"`)
		case r == '\\':
			put(`\\`)
		case r == '\n':
			put(`\n`)
		case r == '\t':
			put(`\t`)
		case Special(r):
			mark(showRune(r))
		default:
			if b != nil {
				b.WriteRune(r)
			}
		}
	}
	put(`"`)
	i++
	for i < len(raw) {
		c := raw[i]
		switch {
		case c == '"':
			put(`"`)
			return i + 1
		case c == '\\':
			e := raw[i+1]
			i += 2
			switch e {
			case 'u':
				r := hex4(raw[i:])
				i += 4
				if utf16.IsSurrogate(r) && r < 0xdc00 && i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if r2 := hex4(raw[i+2:]); 0xdc00 <= r2 && r2 <= 0xdfff {
						r = utf16.DecodeRune(r, r2)
						i += 6
					}
				}
				putRune(r)
			case 'b':
				putRune('\b')
			case 'f':
				putRune('\f')
			case 'n':
				putRune('\n')
			case 'r':
				putRune('\r')
			case 't':
				putRune('\t')
			default: // " \ /
				putRune(rune(e))
			}
		case c < utf8.RuneSelf:
			putRune(rune(c))
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				mark(showByte(c))
			} else {
				putRune(r)
			}
			i += size
		}
	}
	return i
}

// escapeRune is r as a JSON \u escape (a surrogate pair beyond U+FFFF).
func escapeRune(r rune) string {
	if r > 0xffff {
		r1, r2 := utf16.EncodeRune(r)
		return fmt.Sprintf(`\u%04x\u%04x`, r1, r2)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

func hex4(b []byte) rune {
	v, _ := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(v)
}
