package agent

import (
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
