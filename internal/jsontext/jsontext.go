// Package jsontext encodes JSON for people to read: "a > b" stays
// "a > b", where encoding/json's Marshal writes "a \u003e b" to be safe
// inside HTML. Everything tollgate stores for people and models to read
// (messages, tool results, question payloads, the audit log) is encoded
// here. Digests keep encoding/json's bytes, HTML escapes and all (see
// agent.CallDigest): [MarshalHTML] writes those. Both, and the appenders
// packages use to encode their own types, write without reflection what
// they can, byte for byte as encoding/json would; [Valid] is json.Valid.
package jsontext

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Marshal is json.Marshal without HTML escaping.
//
// The audit log's entries are maps of strings, numbers, booleans and
// lists and maps of them: those are encoded here without reflection,
// byte for byte as encoding/json would (BenchmarkMarshal, a tool_result
// entry with its approval trace: 4 allocations instead of 22; times in
// bench/README.md). A value of any other type, anywhere in it, goes to
// encoding/json whole.
func Marshal(v any) ([]byte, error) {
	switch v := v.(type) {
	case map[string]any, map[string]string, []any, []string:
		if b, ok := appendValue(make([]byte, 0, 256), v, 0, false); ok {
			return b, nil
		}
	case json.RawMessage:
		if b, ok := AppendRaw(make([]byte, 0, len(v)), v); ok {
			return b, nil
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// MarshalHTML is json.Marshal (HTML escaping and all) for the values
// Marshal encodes without reflection, json.Number included: fixed bytes,
// for digests. Any other value goes to json.Marshal.
func MarshalHTML(v any) ([]byte, error) {
	switch v.(type) {
	case map[string]any, map[string]string, []any, []string:
		if b, ok := appendValue(make([]byte, 0, 256), v, 0, true); ok {
			return b, nil
		}
	}
	return json.Marshal(v)
}

// appendValue appends v as encoding/json encodes it (with HTML escaping
// when html, as json.Marshal; without, as Marshal), and reports false (b is then garbage) for a type it does not
// know or a value encoding/json refuses (NaN, infinities, a map or list
// that holds itself: past maxDepth levels): the caller then asks
// encoding/json, which says what is wrong.
func appendValue(b []byte, v any, depth int, html bool) ([]byte, bool) {
	if depth > maxDepth {
		return b, false
	}
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return appendString(b, v, html), true
	case json.Number:
		// As encoding/json: the zero Number is 0, an invalid one an error.
		if v == "" {
			v = "0"
		}
		if !ValidNumber(v) {
			return b, false
		}
		return append(b, v...), true
	case json.RawMessage:
		if html {
			return b, false // encoding/json escapes in it: not done here
		}
		return AppendRaw(b, v)
	case bool:
		return strconv.AppendBool(b, v), true
	case int:
		return strconv.AppendInt(b, int64(v), 10), true
	case int64:
		return strconv.AppendInt(b, v, 10), true
	case int32:
		return strconv.AppendInt(b, int64(v), 10), true
	case uint64:
		return strconv.AppendUint(b, v, 10), true
	case float64:
		return appendFloat(b, v, 64)
	case float32:
		return appendFloat(b, float64(v), 32)
	case map[string]any:
		if v == nil {
			return append(b, "null"...), true
		}
		b = append(b, '{')
		for i, k := range sortedKeys(v) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendString(b, k, html), ':')
			var ok bool
			if b, ok = appendValue(b, v[k], depth+1, html); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	case map[string]string:
		if v == nil {
			return append(b, "null"...), true
		}
		b = append(b, '{')
		for i, k := range sortedKeys(v) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(append(appendString(b, k, html), ':'), v[k], html)
		}
		return append(b, '}'), true
	case []any:
		if v == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendValue(b, e, depth+1, html); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case []string:
		if v == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, e, html)
		}
		return append(b, ']'), true
	}
	return b, false
}

// maxDepth is where encoding/json starts looking for cycles.
const maxDepth = 1000

// sortedKeys are m's keys in encoding/json's order (byte order).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendFloat is encoding/json's floatEncoder: ES6 number formatting.
func appendFloat(b []byte, f float64, bits int) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

const hex = "0123456789abcdef"

// appendString is encoding/json's appendString: quotes and backslashes
// escaped, control characters as \b \f \n \r \t or \u00XX, invalid
// UTF-8 as \ufffd, U+2028 and U+2029 escaped; with html, < > & as \u00XX
// too.
func appendString(b []byte, s string, html bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!html || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// ValidNumber is encoding/json's isValidNumber: s is a JSON number
// literal.
func ValidNumber[T ~string | ~[]byte](s T) bool {
	if len(s) == 0 {
		return false
	}
	if s[0] == '-' {
		if s = s[1:]; len(s) == 0 {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = s[1:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = s[2:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			if s = s[1:]; len(s) == 0 {
				return false
			}
		}
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	return len(s) == 0
}
