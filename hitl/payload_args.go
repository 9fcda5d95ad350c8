package hitl

import (
	"unicode/utf8"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// canonicalArgsText is the payload's "args" text for raw arguments in the
// canonical form the run hands middleware (json.Marshal's bytes of the
// decoded object: keys in order, no white space, its escapes) — what
// jsontext.Marshal of decodeArgs(raw) writes, found without decoding: raw
// with json.Marshal's HTML escapes undone. ok false for any raw that is
// not exactly in that form (keys with escapes or out of order, white
// space, an escape json.Marshal would not write, invalid UTF-8, nesting
// past 1,000 levels, not an object): the payload then decodes it
// (TestCanonicalArgsText, FuzzCanonicalArgsText). empty: the object has
// no key (the payload leaves "args" out).
func canonicalArgsText(raw []byte) (text []byte, empty, ok bool) {
	if len(raw) < 2 || raw[0] != '{' {
		return nil, false, false
	}
	if string(raw) == "{}" {
		return nil, true, true
	}
	out := make([]byte, 0, len(raw))
	i, ok := canonValue(raw, 0, &out, 0)
	if !ok || i != len(raw) {
		return nil, false, false
	}
	return out, false, true
}

// canonValue checks the value at raw[i], appending it to out with HTML
// escapes undone, and returns the index after it.
func canonValue(raw []byte, i int, out *[]byte, depth int) (int, bool) {
	if i >= len(raw) {
		return i, false
	}
	switch c := raw[i]; {
	case c == '{' || c == '[':
		if depth >= 1000 {
			return i, false
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		*out = append(*out, c)
		i++
		if i < len(raw) && raw[i] == closer {
			*out = append(*out, closer)
			return i + 1, true
		}
		var last []byte // the last key: keys must rise strictly
		for first := true; ; first = false {
			if !first {
				if i >= len(raw) || raw[i] != ',' {
					break
				}
				*out = append(*out, ',')
				i++
			}
			if c == '{' {
				key, next, ok := jsontext.PlainKey(raw, i)
				if !ok || !first && string(key) <= string(last) || next >= len(raw) || raw[next] != ':' {
					return i, false
				}
				last = key
				*out = append(append(append(*out, '"'), key...), '"', ':')
				i = next + 1
			}
			var ok bool
			if i, ok = canonValue(raw, i, out, depth+1); !ok {
				return i, false
			}
		}
		if i >= len(raw) || raw[i] != closer {
			return i, false
		}
		*out = append(*out, closer)
		return i + 1, true
	case c == '"':
		return canonString(raw, i, out)
	default:
		// A number, true, false or null: kept as written (json.Number).
		j := i
		for j < len(raw) && raw[j] != ',' && raw[j] != '}' && raw[j] != ']' {
			j++
		}
		lit := raw[i:j]
		switch string(lit) {
		case "true", "false", "null":
		default:
			if !jsontext.ValidNumber(lit) {
				return i, false
			}
		}
		*out = append(*out, lit...)
		return j, true
	}
}

// canonString checks a string value at raw[i] is as json.Marshal writes
// its decoded text, and appends it with the HTML escapes undone.
func canonString(raw []byte, i int, out *[]byte) (int, bool) {
	*out = append(*out, '"')
	start := i + 1
	for j := start; j < len(raw); {
		c := raw[j]
		switch {
		case c == '"':
			*out = append(append(*out, raw[start:j]...), '"')
			return j + 1, true
		case c == '\\':
			if j+1 >= len(raw) {
				return i, false
			}
			switch raw[j+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				j += 2
				continue
			case 'u':
			default:
				return i, false
			}
			if j+6 > len(raw) {
				return i, false
			}
			switch esc := string(raw[j+2 : j+6]); {
			case esc == "003c" || esc == "003e" || esc == "0026":
				ch := byte('&')
				switch esc {
				case "003c":
					ch = '<'
				case "003e":
					ch = '>'
				}
				*out = append(append(*out, raw[start:j]...), ch)
				j += 6
				start = j
			case esc == "2028" || esc == "2029":
				j += 6
			case esc[0] == '0' && esc[1] == '0' && (esc[2] == '0' || esc[2] == '1') && lowerHex(esc[3]) &&
				esc != "0008" && esc != "000c" && esc != "000a" && esc != "000d" && esc != "0009":
				j += 6 // a control character json.Marshal writes as \u00XX
			default:
				return i, false
			}
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return i, false
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(raw[j:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				return i, false
			}
			j += size
		}
	}
	return i, false
}

func lowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }
