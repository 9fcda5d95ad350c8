package interrupt

import "testing"

func TestID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"fc:1", "approve_fc.3a1"}, // the example of the seed
		{"", "approve_"},
		{"call_abc-XYZ-09", "approve_call_abc-XYZ-09"},
		{"a.b", "approve_a.2eb"},
		{"a.2eb", "approve_a.2e2eb"},
		{"toolu_01 A/B", "approve_toolu_01.20A.2fB"},
		{"é", "approve_.c3.a9"},
		{"λ1", "approve_.ce.bb1"},
		{"🙂", "approve_.f0.9f.99.82"},
		{"\xff\x00", "approve_.ff.00"},
		{"%41", "approve_.2541"},
		{"approve_x", "approve_approve_x"},
	} {
		if got := ID(tc.in); got != tc.want {
			t.Errorf("ID(%q) = %q; want %q", tc.in, got, tc.want)
		}
		back, ok := parseID(tc.want)
		if !ok || back != tc.in {
			t.Errorf("parseID(%q) = %q, %v; want %q", tc.want, back, ok, tc.in)
		}
	}
}

func TestParseIDRejectsNonCanonical(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"fc.3a1",         // no prefix
		"approve_fc.3A1", // uppercase hex
		"approve_.41",    // a letter needs no escape
		"approve_.5f",    // nor does '_'
		"approve_a.",     // truncated escape
		"approve_a.3",    // truncated escape
		"approve_a:b",    // unescaped character
		"approve_é",      // non-ASCII
		"approve_.g0",    // not hex
		"Approve_x",      // prefix is case-sensitive
	} {
		if got, ok := parseID(s); ok {
			t.Errorf("parseID(%q) = %q, true; want false", s, got)
		}
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
