package jsontext

import "unicode/utf8"

// CanonicalHTML reports whether b is one JSON object written exactly as
// MarshalHTML (json.Marshal) writes what encoding/json's Decoder with
// UseNumber decodes from b: no white space, keys in byte order and each
// once, strings with exactly json.Marshal's escapes, numbers as written.
// Such a text is its own canonical form, so a caller may keep it instead
// of decoding and encoding it again (the digest's bytes: agent's
// canonical arguments). It is strict where that is cheap and says false
// for some canonical texts — a key with an escape, or with < > & in it
// (escaped keys sort by their decoded text), nesting past 1,000 levels
// (MarshalHTML hands those to json.Marshal) — which the caller then
// decodes and encodes as before; it never says true for a text that is
// not canonical (FuzzCanonicalHTML checks it against decoding and
// json.Marshal).
func CanonicalHTML(b []byte) bool {
	if len(b) < 2 || b[0] != '{' {
		return false
	}
	end, ok := canonicalValue(b, 0, 0)
	return ok && end == len(b)
}

// canonicalValue checks the value at b[i] and returns the index after it.
func canonicalValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; c {
	case '{':
		return canonicalObject(b, i, depth)
	case '[':
		if depth >= maxDepth {
			return i, false
		}
		i++
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = canonicalValue(b, i, depth+1); !ok || i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ']':
				return i + 1, true
			case ',':
				i++
			default:
				return i, false
			}
		}
	case '"':
		return canonicalString(b, i)
	case 't':
		return ended(literalEnd(b, i, "true"))
	case 'f':
		return ended(literalEnd(b, i, "false"))
	case 'n':
		return ended(literalEnd(b, i, "null"))
	default:
		// A number: json.Number keeps it as written, and encoding/json
		// writes a valid one as it is.
		return ended(numberEnd(b, i))
	}
}

// ended turns an index from valid.go's readers (-1: not so) into
// canonicalValue's answer.
func ended(i int) (int, bool) { return i, i >= 0 }

// canonicalObject checks the object at b[i] (its '{'): plain keys rising
// strictly, each followed by a colon and a canonical value.
func canonicalObject(b []byte, i, depth int) (int, bool) {
	if depth >= maxDepth {
		return i, false
	}
	i++
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	var last []byte
	for first := true; ; first = false {
		key, next, ok := PlainKey(b, i)
		if !ok || !first && string(key) <= string(last) || next >= len(b) || b[next] != ':' {
			return i, false
		}
		last = key
		if i, ok = canonicalValue(b, next+1, depth+1); !ok || i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '}':
			return i + 1, true
		case ',':
			i++
		default:
			return i, false
		}
	}
}

// PlainKey reads the key at b[i]: a string json.Marshal writes as its
// bytes are (no escape, nothing it escapes, valid UTF-8), so that its
// bytes are its decoded text and order keys as MarshalHTML sorts them.
// next is the index after its closing quote.
func PlainKey(b []byte, i int) (key []byte, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c < 0x20 || c == '\\' || c == '<' || c == '>' || c == '&':
			return nil, i, false
		case c < utf8.RuneSelf:
			j++
		default:
			size, ok := marshalledRune(b[j:])
			if !ok {
				return nil, i, false
			}
			j += size
		}
	}
	return nil, i, false
}

// canonicalString checks that the string at b[i] is written as
// json.Marshal writes its decoded text, and returns the index after it.
func canonicalString(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); {
		switch c := b[j]; {
		case c == '"':
			return j + 1, true
		case c == '\\':
			n := canonicalEscape(b[j:])
			if n == 0 {
				return i, false
			}
			j += n
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return i, false
		case c < utf8.RuneSelf:
			j++
		default:
			size, ok := marshalledRune(b[j:])
			if !ok {
				return i, false
			}
			j += size
		}
	}
	return i, false
}

// canonicalEscape is the length of the escape at the start of b if
// json.Marshal writes that escape for the character it stands for (0:
// it does not; it would write the character, or another escape).
func canonicalEscape(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
	default:
		return 0 // \/ among them: json.Marshal writes '/'
	}
	if len(b) < 6 {
		return 0
	}
	switch e := string(b[2:6]); e {
	case "003c", "003e", "0026", "2028", "2029":
		return 6
	case "0008", "0009", "000a", "000c", "000d":
		return 0 // written \b \t \n \f \r
	default:
		// A control character: \u00 and two lower-case hex digits below 0x20.
		if e[0] == '0' && e[1] == '0' && (e[2] == '0' || e[2] == '1') && ('0' <= e[3] && e[3] <= '9' || 'a' <= e[3] && e[3] <= 'f') {
			return 6
		}
		return 0
	}
}

// marshalledRune is the size of the multi-byte rune at the start of b, ok
// when json.Marshal writes it as it is: valid UTF-8 and neither U+2028
// nor U+2029 (which it escapes).
func marshalledRune(b []byte) (int, bool) {
	r, size := utf8.DecodeRune(b)
	return size, !(r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029')
}
