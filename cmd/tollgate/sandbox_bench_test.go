package main

import (
	"testing"

	"github.com/tollgate-ai/tollgate/internal/sandboxbench"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// BenchmarkBashTrue is tools/bash's BenchmarkTrue in a binary that holds
// what tollgate holds: started as the helper ("self"), its start-up
// (package initialisation) is part of the cost of every command, which
// the helper binary (cmd/tollgate-sandbox) does not pay.
//
//	go test ./cmd/tollgate -run '^$' -bench BashTrue -benchtime 200x
func BenchmarkBashTrue(b *testing.B) {
	if err := bash.Check().Enforceable(bash.ReadOnly); err != nil {
		b.Skip(err)
	}
	helper, err := sandboxbench.Build(b.Context(), b.TempDir(), false)
	if err != nil {
		b.Fatal(err)
	}
	defer bash.SetHelper("")
	sandboxbench.Bench(b, sandboxbench.Kinds([]sandboxbench.Named{{Name: "tollgate-sandbox", Path: helper}, {Name: "self"}}))
}
