package main

import (
	"sort"

	"github.com/tollgate-ai/tollgate/internal/nearest"
)

func sortedCommandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// closest returns the name among names nearest to a mistyped one (at most
// two edits away, or one for a short name; a prefix counts too), or "".
func closest(typed string, names []string) string { return nearest.Name(typed, names, true) }
