package shell

import "testing"

// FuzzParse checks that the analysis never panics, and that a string that
// does not parse always needs review. Seeds are in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"ls -la", "ls; rm -rf ~", "bash -c 'rm x'", "echo $((x))", "find . -exec rm {} +"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		a, err := Parse(src)
		if a == nil {
			t.Fatal("nil analysis")
		}
		if err != nil && !a.NeedsReview() {
			t.Fatalf("Parse(%q) failed (%v) but needs no review", src, err)
		}
		if (err == nil) != (a.Err == nil) {
			t.Fatalf("Parse(%q): error %v, Analysis.Err %v", src, err, a.Err)
		}
		for _, c := range a.Commands {
			if c.Dynamic && (c.Name != "" || len(c.Review) == 0) {
				t.Fatalf("Parse(%q): dynamic command %+v has a name or no review", src, c)
			}
			_ = c.String()
		}
		_ = a.Reasons()
		checkEffects(t, src, a)
	})
}

// checkEffects: every effect says something at a known risk, the list is
// bounded, and a string reads as low risk only when every command is one
// the package knows, and none writes, reaches outside the working
// directory, reads secrets, is computed or needs review.
func checkEffects(t *testing.T, src string, a *Analysis) {
	t.Helper()
	effects := a.Effects()
	if len(effects) == 0 || len(effects) > maxEffects+1 {
		t.Fatalf("Parse(%q): %d effects", src, len(effects))
	}
	for _, e := range effects {
		if e.Text == "" || e.Kind == "" || e.Risk.rank() == 0 || len(e.Objects) > maxObjects {
			t.Fatalf("Parse(%q): effect %+v", src, e)
		}
	}
	if RiskOf(effects) != RiskLow {
		return
	}
	if len(a.Review) > 0 {
		t.Fatalf("Parse(%q): low risk, but it needs review: %q", src, a.Review)
	}
	for _, c := range a.Commands {
		shell, interp := interpreters[c.Name]
		_, flags := operands(c.Args)
		if c.Writes || c.Dynamic || len(c.Outside) > 0 || len(c.Secrets) > 0 || len(c.Review) > 0 ||
			c.Name != "" && !readers[c.Name] && known[c.Name].check == nil ||
			interp && c.Name != "eval" && !(shell && hasFlag(flags, 'c')) { // a shell's -c string is analysed
			t.Fatalf("Parse(%q): low risk, but %s writes, reaches outside, reads secrets, is computed, is not known or needs review", src, c.String())
		}
	}
}
