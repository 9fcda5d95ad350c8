package bash

import (
	"strings"
	"testing"
)

// TestEnforceable: which kernels enforce the confined profiles, and what
// the report says when they do not.
func TestEnforceable(t *testing.T) {
	t.Parallel()
	full := Report{OS: "linux", ABI: 7, UserNS: true, NetNS: true, PidNS: true, MountNS: true, helperOK: true}
	for _, c := range []struct {
		name string
		r    Report
		want string // "" when enforced
	}{
		{"ABI 7 with namespaces", full, ""},
		{"ABI 10 with only a mount namespace", Report{OS: "linux", ABI: 10, MountNS: true, helperOK: true}, ""},
		{"no mount namespace", Report{OS: "linux", ABI: 10, NetNS: true, PidNS: true, helperOK: true, NamespaceErr: "operation not permitted"}, "no mount namespace (operation not permitted): tollgate's own state"},
		{"no Landlock", Report{OS: "linux", LandlockErr: "function not implemented", helperOK: true, NetNS: true}, "no Landlock (function not implemented)"},
		{"not Linux", Report{OS: "darwin", LandlockErr: "Landlock is Linux only"}, "Landlock is Linux only, this is darwin"},
		{"ABI 2", Report{OS: "linux", ABI: 2, NetNS: true, helperOK: true}, "cannot stop truncation"},
		{"ABI 7 without a network namespace", Report{OS: "linux", ABI: 7, helperOK: true, NamespaceErr: "operation not permitted"}, "no network namespace (operation not permitted), and Landlock ABI 7 cannot stop UDP"},
		{"no helper", Report{OS: "linux", ABI: 7, HelperErr: "bash.MaybeRunHelper() is not called"}, "MaybeRunHelper"},
	} {
		for _, p := range []Profile{ReadOnly, WorkspaceWrite} {
			err := c.r.Enforceable(p)
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("%s, %s: %v, want %q", c.name, p, err, c.want)
			}
		}
		if err := c.r.Enforceable(Unconfined); err != nil {
			t.Errorf("%s: unconfined: %v", c.name, err)
		}
		sum := c.r.Summary()
		if (c.want == "") != strings.Contains(sum, "read-only: enforced") {
			t.Errorf("%s: summary %q", c.name, sum)
		}
	}
	enforced, not := full.Enforced()
	if len(enforced) == 0 || !strings.Contains(strings.Join(not, "\n"), "pathname UNIX sockets") {
		t.Errorf("enforced %q, not %q", enforced, not)
	}
	var b strings.Builder
	_ = Report{OS: "linux"}.Write(&b)
	if !strings.Contains(b.String(), "read-only        NOT enforced") {
		t.Errorf("%s", b.String())
	}
}
