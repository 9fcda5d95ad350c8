package agent

import (
	"bytes"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// FuzzCanonicalHTMLNearCanonical: texts one edit away from a canonical
// text (the old decode-and-encode of the fuzzer's bytes) are where a
// CanonicalHTML that says true too often would show: for any of them it
// says true of, the old canonicalArgs gives the text back byte for byte.
func FuzzCanonicalHTMLNearCanonical(f *testing.F) {
	for _, c := range canonicalArgsCases {
		f.Add([]byte(c), uint16(3), byte('\\'), uint8(0))
	}
	f.Add([]byte(`{"a":"\u2028","b":[1,2]}`), uint16(7), byte('u'), uint8(1))
	f.Add([]byte(`{"a":1,"b":2}`), uint16(8), byte('a'), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, pos uint16, c byte, op uint8) {
		base := canonicalArgsBefore(data)
		if len(base) == 0 || base[0] != '{' {
			return
		}
		for _, raw := range [][]byte{base, edit(base, int(pos), c, op)} {
			if !jsontext.CanonicalHTML(raw) {
				continue
			}
			if before := canonicalArgsBefore(bytes.Clone(raw)); !bytes.Equal(before, raw) {
				t.Fatalf("CanonicalHTML(%q) = true; decoded and encoded it is %q", raw, before)
			}
		}
	})
}

// edit changes, inserts or deletes one byte of b (a copy).
func edit(b []byte, pos int, c byte, op uint8) []byte {
	b = bytes.Clone(b)
	pos %= len(b) + 1
	switch op % 3 {
	case 0:
		if pos < len(b) {
			b[pos] = c
		}
		return b
	case 1:
		return append(b[:pos], append([]byte{c}, b[pos:]...)...)
	default:
		if pos < len(b) {
			return append(b[:pos], b[pos+1:]...)
		}
		return b
	}
}
