package display

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
)

// pageSpecial reads the reviewer page's SPECIAL regular expression and
// returns the set of code points it matches. It understands the shape the
// page writes (BMP classes, a high surrogate followed by a class of low
// ones, and lone surrogates with lookarounds) and fails the test on any
// other, so a change of the page's set is seen here.
func pageSpecial(t *testing.T) func(rune) bool {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "server", "web", "assets", "app.js"))
	if err != nil {
		t.Fatalf("reading the reviewer page: %v", err)
	}
	m := regexp.MustCompile(`(?m)^const SPECIAL = /(.*)/g;$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("app.js has no `const SPECIAL = /.../g;` line")
	}
	lookaround := regexp.MustCompile(`\(\?<?!\[[^\]]*\]\)`)
	var ranges [][2]rune
	for _, alt := range splitTop(string(m[1])) {
		switch {
		case lookaround.MatchString(alt):
			class := lookaround.ReplaceAllString(alt, "")
			ranges = append(ranges, parseClass(t, strings.TrimSuffix(strings.TrimPrefix(class, "["), "]"))...)
		case strings.HasPrefix(alt, "["):
			ranges = append(ranges, parseClass(t, strings.TrimSuffix(alt[1:], "]"))...)
		case strings.HasPrefix(alt, `\u`) && len(alt) > 7 && alt[6] == '[':
			hi := hexRune(t, alt[2:6])
			for _, lo := range parseClass(t, strings.TrimSuffix(alt[7:], "]")) {
				ranges = append(ranges, [2]rune{utf16.DecodeRune(hi, lo[0]), utf16.DecodeRune(hi, lo[1])})
			}
		default:
			t.Fatalf("SPECIAL has an alternative this test does not understand: %q", alt)
		}
	}
	return func(r rune) bool {
		for _, rg := range ranges {
			if rg[0] <= r && r <= rg[1] {
				return true
			}
		}
		return false
	}
}

// splitTop splits a regular expression at the | outside brackets and
// parentheses.
func splitTop(re string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(re); i++ {
		switch re[i] {
		case '\\':
			i++
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '|':
			if depth == 0 {
				out = append(out, re[start:i])
				start = i + 1
			}
		}
	}
	return append(out, re[start:])
}

// parseClass reads the inside of a character class made of \0, \xHH,
// \uHHHH and literal characters, single or in ranges.
func parseClass(t *testing.T, class string) [][2]rune {
	t.Helper()
	var out [][2]rune
	one := func() rune {
		if class == "" {
			t.Fatal("SPECIAL: a class ends in a range")
		}
		if class[0] != '\\' {
			r := []rune(class)[0]
			class = class[len(string(r)):]
			return r
		}
		switch {
		case strings.HasPrefix(class, `\0`):
			class = class[2:]
			return 0
		case strings.HasPrefix(class, `\x`):
			r := hexRune(t, class[2:4])
			class = class[4:]
			return r
		case strings.HasPrefix(class, `\u`):
			r := hexRune(t, class[2:6])
			class = class[6:]
			return r
		}
		t.Fatalf("SPECIAL: escape this test does not understand at %q", class)
		return 0
	}
	for class != "" {
		lo := one()
		hi := lo
		if strings.HasPrefix(class, "-") && len(class) > 1 {
			class = class[1:]
			hi = one()
		}
		out = append(out, [2]rune{lo, hi})
	}
	return out
}

func hexRune(t *testing.T, s string) rune {
	t.Helper()
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		t.Fatalf("SPECIAL: bad hex %q", s)
	}
	return rune(v)
}
