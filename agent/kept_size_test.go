package agent

import (
	"reflect"
	"strings"
	"testing"
)

// What a parked run keeps is bounded by the bytes it holds: a tool
// result's details count as much as they hold (a tool's own data, a
// hitl edit's trace with both argument objects), not 64 bytes an entry,
// or one parked run holds megabytes under the 64 KB bound, 256 times.
func TestKeptSizeCountsResultDetails(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 1<<20)
	msgs := []Message{
		{Role: RoleUser, Text: "go"},
		{Role: RoleTool, Result: &ToolResult{CallID: "c1", Content: "ok", Details: map[string]any{"data": big}}},
	}
	if n := keptSize(msgs); n <= maxKeptBytes {
		t.Fatalf("keptSize = %d for a thread holding a 1 MB result detail: kept under the %d byte bound", n, maxKeptBytes)
	}
}

// Arguments are handed to a decision made again only when nothing in
// them can be changed in place.
func TestByValue(t *testing.T) {
	t.Parallel()
	type inner struct {
		N [2]int
		S string
	}
	for _, c := range []struct {
		v    any
		want bool
	}{
		{struct{ Cmd string }{}, true},
		{struct {
			In inner
			F  float64
		}{}, true},
		{struct{ Env map[string]string }{}, false},
		{struct{ Args []string }{}, false},
		{struct{ P *int }{}, false},
		{struct{ X any }{}, false},
		{map[string]any{}, false},
		{&inner{}, false},
	} {
		if got := byValue(reflect.TypeOf(c.v)); got != c.want {
			t.Errorf("byValue(%T) = %v, want %v", c.v, got, c.want)
		}
	}
}
