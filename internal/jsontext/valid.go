package jsontext

// Valid reports whether b is one JSON value (with white space around
// it), exactly as json.Valid does — invalid UTF-8 inside strings is
// accepted, nesting deeper than 10,000 is not — in a loop that goes
// through a string's plain bytes several at a time: the stores check every
// message a run appends, and encoding/json's scanner, a call per byte,
// was the larger part of the memory store's commit (TestValidAsJSONValid,
// FuzzValid).
func Valid(b []byte) bool {
	// stack: the open objects ('{') and arrays ('[').
	var small [32]byte
	stack := small[:0]
	i := skipWS(b, 0)
	for {
		// A value at b[i].
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) >= maxNesting {
				return false
			}
			stack = append(stack, c)
			i = skipWS(b, i+1)
			if i < len(b) && (c == '{' && b[i] == '}' || c == '[' && b[i] == ']') {
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if i = keyColon(b, i); i < 0 {
					return false
				}
			}
			continue
		case c == '"':
			if i = stringEnd(b, i); i < 0 {
				return false
			}
		case c == '-' || '0' <= c && c <= '9':
			if i = numberEnd(b, i); i < 0 {
				return false
			}
		case c == 't':
			if i = literalEnd(b, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = literalEnd(b, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = literalEnd(b, i, "null"); i < 0 {
				return false
			}
		default:
			return false
		}
		// After a value: a comma and the next, or the end of what holds it.
		for {
			i = skipWS(b, i)
			if len(stack) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := stack[len(stack)-1]
			if b[i] == ',' {
				i = skipWS(b, i+1)
				if top == '{' {
					if i = keyColon(b, i); i < 0 {
						return false
					}
				}
				break
			}
			if top == '{' && b[i] != '}' || top == '[' && b[i] != ']' {
				return false
			}
			stack = stack[:len(stack)-1]
			i++
		}
	}
}

// maxNesting is encoding/json's scanner's maxNestingDepth.
const maxNesting = 10000

// keyColon reads an object's key at b[i] and the colon after it, and
// returns where the value starts (-1: not so).
func keyColon(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = stringEnd(b, i); i < 0 {
		return -1
	}
	if i = skipWS(b, i); i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipWS(b, i+1)
}

// stringEnd returns the index after the string that starts at b[i] (a
// quote), or -1: a control character, a bad escape, no closing quote.
func stringEnd(b []byte, i int) int {
	i++
	for i < len(b) {
		// Plain bytes, eight at a time while none of them can be special.
		for i+8 <= len(b) && plain(b[i]) && plain(b[i+1]) && plain(b[i+2]) && plain(b[i+3]) &&
			plain(b[i+4]) && plain(b[i+5]) && plain(b[i+6]) && plain(b[i+7]) {
			i += 8
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		case c < 0x20:
			return -1
		default:
			i++
		}
	}
	return -1
}

func plain(c byte) bool { return c >= 0x20 && c != '"' && c != '\\' }

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// numberEnd returns the index after the number that starts at b[i], or -1.
func numberEnd(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if i++; i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	return i
}

func literalEnd(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
