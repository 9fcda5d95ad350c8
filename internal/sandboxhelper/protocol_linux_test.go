package sandboxhelper

import (
	"bytes"
	"io/fs"
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"testing/fstest"
)

// buildInfo is the build information of a binary that links go-landlock
// version landlock.
func buildInfo(landlock string) *debug.BuildInfo {
	return &debug.BuildInfo{GoVersion: "go1.26.0", Deps: []*debug.Module{
		{Path: "github.com/landlock-lsm/go-landlock", Version: landlock, Sum: "h1:a="},
		{Path: "golang.org/x/sys", Version: "v0.49.0", Sum: "h1:b="},
	}}
}

// embedded is a copy of sources, to change.
func embedded(t testing.TB) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	err := fs.WalkDir(sources, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(sources, path)
		m[path] = &fstest.MapFile{Data: data}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestProtocolCoversSource: a helper built with other Landlock rules
// speaks another protocol (the security review's case: a helper with
// landlock.RWDirs("/") added to rules() printed the same protocol when
// it covered only the configuration's fields), and so does one that
// links another go-landlock or was built by another Go; the test files
// do not count.
func TestProtocolCoversSource(t *testing.T) {
	src, bi := embedded(t), buildInfo("v0.11.2")
	own := protocolOf(src, bi)
	if own != protocolOf(embedded(t), buildInfo("v0.11.2")) {
		t.Fatal("protocolOf is not a function of its arguments")
	}
	if !strings.HasPrefix(own, "2-") || strings.HasSuffix(own, noModules) {
		t.Errorf("protocol %s, want 2-<16 hex>-<16 hex>", own)
	}
	const file, fn = "helper_linux.go", "func rules(c Config) []landlock.Rule {\n"
	if !bytes.Contains(src[file].Data, []byte(fn)) {
		t.Fatalf("no rules() in %s: change the test", file)
	}
	wider := embedded(t)
	wider[file].Data = bytes.Replace(src[file].Data, []byte(fn), []byte(fn+"\trules = append(rules, landlock.RWDirs(\"/\"))\n"), 1)
	older := buildInfo("v0.11.1")
	goolder := buildInfo("v0.11.2")
	goolder.GoVersion = "go1.25.0"
	added := embedded(t)
	added["extra_linux.go"] = &fstest.MapFile{Data: []byte("package sandboxhelper\n")}
	tests := embedded(t)
	tests["helper_linux_test.go"] = &fstest.MapFile{Data: []byte("package sandboxhelper_test\n")}
	for _, c := range []struct {
		name string
		got  string
		same bool
	}{
		{"rules() changed", protocolOf(wider, bi), false},
		{"a file added", protocolOf(added, bi), false},
		{"another go-landlock", protocolOf(src, older), false},
		{"another Go", protocolOf(src, goolder), false},
		{"a test file changed", protocolOf(tests, bi), true},
		{"a test binary (no modules listed)", protocolOf(src, &debug.BuildInfo{GoVersion: bi.GoVersion}), true},
		{"a test binary with rules() changed", protocolOf(wider, &debug.BuildInfo{GoVersion: bi.GoVersion}), false},
	} {
		if same := sameProtocol(own, c.got) && sameProtocol(c.got, own); same != c.same {
			t.Errorf("%s: protocol %s against %s: same %v, want %v", c.name, c.got, own, same, c.same)
		}
	}
}

// TestSourcesEmbedded: sources holds every Go file of the package as it
// is on disk.
func TestSourcesEmbedded(t *testing.T) {
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".go") {
			continue
		}
		disk, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		if got, err := fs.ReadFile(sources, f.Name()); err != nil || !bytes.Equal(got, disk) {
			t.Errorf("%s: embedded %d bytes (%v), %d on disk", f.Name(), len(got), err, len(disk))
		}
		n++
	}
	if n < 5 {
		t.Errorf("%d Go files in the package directory", n)
	}
}

// BenchmarkProtocol is what a helper's start pays for Protocol, once.
func BenchmarkProtocol(b *testing.B) {
	bi := buildInfo("v0.11.2")
	for b.Loop() {
		protocolOf(sources, bi)
	}
}
