package agent

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// Every \uXXXX escape (either case of hex), every one- and two-byte text
// and every three-byte text from 0xE0 on, in a string value and in a
// key: wherever CanonicalHTML says true, the old decode-and-encode gives
// the text back byte for byte.
func TestCanonicalHTMLExhaustiveShortStrings(t *testing.T) {
	if testing.Short() {
		t.Skip("a million texts")
	}
	var kept, bad int
	check := func(raw []byte) {
		if !jsontext.CanonicalHTML(raw) {
			return
		}
		kept++
		if before := canonicalArgsBefore(bytes.Clone(raw)); !bytes.Equal(before, raw) {
			bad++
			if bad < 10 {
				t.Errorf("CanonicalHTML(%q) = true; decoded and encoded %q", raw, before)
			}
		}
	}
	both := func(s []byte) {
		check(append(append([]byte(`{"s":"`), s...), `"}`...))
		check(append(append([]byte(`{"`), s...), `":1}`...))
	}
	for u := 0; u < 0x10000; u++ {
		both([]byte(fmt.Sprintf(`\u%04x`, u)))
		both([]byte(fmt.Sprintf(`\u%04X`, u)))
	}
	for a := 0; a < 256; a++ {
		both([]byte{byte(a)})
		for b := 0; b < 256; b++ {
			both([]byte{byte(a), byte(b)})
		}
	}
	for a := 0xe0; a < 0x100; a++ {
		for b := 0; b < 256; b++ {
			for c := 0; c < 256; c++ {
				check([]byte{'{', '"', 's', '"', ':', '"', byte(a), byte(b), byte(c), '"', '}'})
			}
		}
	}
	t.Logf("%d texts kept as canonical", kept)
}

// Every text of up to five characters of numbers' alphabet (and a few
// literals' letters) as a value: CanonicalHTML says true only where the
// old decode-and-encode gives the text back.
func TestCanonicalHTMLExhaustiveShortNumbers(t *testing.T) {
	if testing.Short() {
		t.Skip("a million texts")
	}
	const alphabet = "0123456789-+.eEtnul"
	var kept int
	var walk func(s []byte)
	walk = func(s []byte) {
		raw := append(append([]byte(`{"n":`), s...), '}')
		if jsontext.CanonicalHTML(raw) {
			kept++
			if before := canonicalArgsBefore(bytes.Clone(raw)); !bytes.Equal(before, raw) {
				t.Fatalf("CanonicalHTML(%q) = true; decoded and encoded %q", raw, before)
			}
		}
		if len(s) == 5 {
			return
		}
		for i := range len(alphabet) {
			walk(append(s, alphabet[i]))
		}
	}
	walk(nil)
	t.Logf("%d texts kept as canonical", kept)
}

// Every text of '{' and up to seven characters of structure: key order,
// duplicates, nesting, commas, colons, white space.
func TestCanonicalHTMLExhaustiveShortStructure(t *testing.T) {
	if testing.Short() {
		t.Skip("millions of texts")
	}
	const alphabet = "{}[]\":,ab1 "
	var kept int
	var walk func(s []byte)
	walk = func(s []byte) {
		if jsontext.CanonicalHTML(s) {
			kept++
			if before := canonicalArgsBefore(bytes.Clone(s)); !bytes.Equal(before, s) {
				t.Fatalf("CanonicalHTML(%q) = true; decoded and encoded %q", s, before)
			}
		}
		if len(s) == 8 {
			return
		}
		for i := range len(alphabet) {
			walk(append(s, alphabet[i]))
		}
	}
	walk([]byte{'{'})
	t.Logf("%d texts kept as canonical", kept)
}
