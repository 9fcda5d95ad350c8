package nearest

import "testing"

func TestName(t *testing.T) {
	names := []string{"serve", "sqlite", "postgres", "run"}
	for _, c := range []struct {
		typed  string
		prefix bool
		want   string
	}{
		{"sqllite", false, "sqlite"}, {"postgress", false, "postgres"}, {"ser", true, "serve"},
		{"ser", false, ""}, {"rn", false, "run"}, {"xyzzy", true, ""},
	} {
		if got := Name(c.typed, names, c.prefix); got != c.want {
			t.Errorf("Name(%q, prefix %v) = %q, want %q", c.typed, c.prefix, got, c.want)
		}
	}
	if d := Distance("kitten", "sitting"); d != 3 {
		t.Errorf("Distance = %d", d)
	}
}
