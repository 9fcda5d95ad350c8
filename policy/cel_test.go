package policy

import (
	"context"
	"slices"
	"testing"
)

// TestCommandsInHelpers: commands_all_in holds when every command the
// shell would run is named in the list (and there is one at least);
// commands_any_in when one is; a command whose name is computed matches
// neither, whatever the list says.
func TestCommandsInHelpers(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `
rules:
  - name: all-in
    tool: bash
    when: commands_all_in(args.cmd, ["ls", "git"])
    action: allow
  - name: any-in
    tool: bash
    when: commands_any_in(args.cmd, ["rm", "*ssh*"])
    action: block
  - name: any-named
    tool: bash
    when: commands_any_in(args.cmd, ["*"])
    action: ask
`, nil)
	for _, tt := range []struct {
		cmd  string
		want []string // the rules whose condition holds
	}{
		{"ls -l && git log", []string{"all-in", "any-named"}},
		{"ls; cat f", []string{"any-named"}},
		{"ls; rm -r y", []string{"any-in", "any-named"}},
		{"git log | ssh-keygen -y", []string{"any-in", "any-named"}},
		{"$x status", nil},
		{"ls; $x", []string{"any-named"}},
		{"x=1", nil},
	} {
		d := p.Evaluate(context.Background(), bash(tt.cmd))
		var got []string
		for _, m := range d.Matched {
			if slices.Contains([]string{"all-in", "any-in", "any-named"}, m.Rule) && !slices.Contains(got, m.Rule) {
				got = append(got, m.Rule)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%q: the helpers' rules that hold: %v, want %v (%s by %s)", tt.cmd, got, tt.want, d.Action, d.Rule)
		}
	}
}
