package agent

import (
	"fmt"
	"testing"
)

// A model turn's call ids are made unique against the thread's earlier
// calls without going over the whole thread again: a run's later turns
// cost what they add.
func TestCallIDsPerTurnCostWhatTheyAdd(t *testing.T) {
	var history []Message
	for i := range 2000 {
		history = append(history, Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: fmt.Sprint("c", i)}}})
	}
	var c callIDs
	first := &Message{ToolCalls: []ToolCall{{ID: "c7"}, {ID: ""}}}
	c.unique(first, history, "run_0123456789")
	if first.ToolCalls[0].ID != "c7_2" || first.ToolCalls[1].ID != "call_01234567_2000_1" {
		t.Fatalf("ids %q, %q", first.ToolCalls[0].ID, first.ToolCalls[1].ID)
	}
	history = append(history, *first)
	second := &Message{ToolCalls: []ToolCall{{ID: "c7"}, {ID: "c7_2"}}}
	c.unique(second, history, "run_0123456789")
	if second.ToolCalls[0].ID != "c7_3" || second.ToolCalls[1].ID != "c7_2_2" {
		t.Fatalf("ids %q, %q", second.ToolCalls[0].ID, second.ToolCalls[1].ID)
	}
	history = append(history, *second)
	fresh := make([]string, 60)
	for i := range fresh {
		fresh[i] = fmt.Sprint("new", i)
	}
	n := 0
	allocs := testing.AllocsPerRun(50, func() {
		m := &Message{ToolCalls: []ToolCall{{ID: fresh[n]}}}
		n++
		c.unique(m, history, "run_0123456789")
	})
	// A map of the thread's 2,000 ids would be hundreds of allocations;
	// the turn itself is a few (its message, a renamed id).
	if allocs > 10 {
		t.Errorf("a turn on a thread of 2,000 calls made %.0f allocations", allocs)
	}
}
