package shell

import "testing"

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Parse("ls -la src | grep -v _test.go && cat README.md; wc -l main.go; head -n 20 go.mod")
	}
}
