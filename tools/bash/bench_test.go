package bash_test

import (
	"os"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/sandboxbench"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// BenchmarkTrue is the cost of one command, `true`, per profile, started
// through the helper binary (cmd/tollgate-sandbox) and through this
// (small) test binary re-executed, beside bash -c true started directly,
// taking turns: what the helper (namespaces, Landlock) and the supervisor
// add to a plain command. Each kind's median and 99th percentile, and the
// load average, are its metrics; cmd/tollgate's BenchmarkBashTrue is the
// same from a tollgate-sized binary.
//
//	go test ./tools/bash -run '^$' -bench True -benchtime 200x
func BenchmarkTrue(b *testing.B) {
	if err := bash.Check().Enforceable(bash.ReadOnly); err != nil {
		b.Skip(err)
	}
	helper, err := sandboxbench.Build(b.Context(), b.TempDir(), false)
	if err != nil {
		b.Fatal(err)
	}
	defer bash.SetHelper(os.Getenv(helperEnv))
	sandboxbench.Bench(b, sandboxbench.Kinds([]sandboxbench.Named{{Name: "tollgate-sandbox", Path: helper}, {Name: "self"}}))
}
