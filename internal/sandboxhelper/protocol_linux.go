package sandboxhelper

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// sources is this package's code, which is what the helper does: its
// Landlock rules, seccomp filter, mount view and masking. An embed
// pattern knows no build tags, so tollgate and tollgate-sandbox embed the
// same files on every platform; Protocol leaves the _test.go files out.
//
//go:embed *.go
var sources embed.FS

// Protocol names this build of the helper, for a helper binary to be
// trusted only by a tollgate of the same build and the other way round:
// a version, bumped when what a field means changes (or what Protocol
// covers), then a hash of the fields of Config and SuperviseConfig
// (names, JSON keys, types), of this package's source (sources) and of
// the Go version, then a hash of the versions of the modules the helper
// links (linked). A helper binary left from another build (one built
// with other Landlock rules, another seccomp filter, an older
// go-landlock) refuses the configuration rather than confine a command
// otherwise than this tollgate would: tollgate's probe sees the refusal
// and runs itself as the helper. It is computed once, on first use (a
// helper checks it on every start; BenchmarkProtocol).
var Protocol = sync.OnceValue(func() string {
	bi, _ := debug.ReadBuildInfo()
	return protocolOf(sources, bi)
})

// protocolVersion is bumped when what a field means, or what Protocol
// covers, changes (2: the source and the linked modules).
const protocolVersion = 2

// linked are the modules the helper links beyond the standard library
// (which the Go version names).
var linked = []string{"github.com/landlock-lsm/go-landlock", "golang.org/x/sys"}

// noModules ends the Protocol of a binary whose build information lists
// no modules: a test binary (go test records none), or one built outside
// module mode. See SameProtocol.
const noModules = "nomodules"

// protocolOf is Protocol for the source files in src (the *.go files at
// its root, _test.go files left out) and the build information bi (nil:
// none).
func protocolOf(src fs.FS, bi *debug.BuildInfo) string {
	h := sha256.New()
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			fmt.Fprintf(h, "%s %s %s;", f.Name, f.Tag.Get("json"), f.Type)
			if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct {
				walk(f.Type.Elem())
			}
		}
	}
	walk(reflect.TypeFor[SuperviseConfig]())
	files, err := fs.ReadDir(src, ".") // sorted
	fmt.Fprintf(h, "\nsources %v\n", err)
	for _, f := range files {
		name := f.Name()
		if f.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		data, err := fs.ReadFile(src, name)
		fmt.Fprintf(h, "%s %d %v\n", name, len(data), err)
		h.Write(data)
	}
	goVersion := runtime.Version()
	if bi != nil {
		goVersion = bi.GoVersion
	}
	fmt.Fprintf(h, "go %s\n", goVersion)
	deps := noModules
	if bi != nil && len(bi.Deps) > 0 {
		d := sha256.New()
		for _, path := range linked {
			fmt.Fprintf(d, "%s:", path)
			for _, m := range bi.Deps {
				if m.Path != path {
					continue
				}
				for ; m != nil; m = m.Replace { // a replaced module, then its replacement
					fmt.Fprintf(d, " %s %s %s", m.Path, m.Version, m.Sum)
				}
			}
			fmt.Fprintln(d)
		}
		deps = hex.EncodeToString(d.Sum(nil)[:8])
	}
	return fmt.Sprintf("%d-%x-%s", protocolVersion, h.Sum(nil)[:8], deps)
}

// SameProtocol reports whether peer, the Protocol of the other side (the
// helper binary asked, or the tollgate that sent a configuration), is
// this build's. A test binary's build information lists no modules, so
// its Protocol cannot say which go-landlock and x/sys it links: against
// it, the rest (fields, source, Go version) must be the same. Every
// binary go build or go install makes lists them.
func SameProtocol(peer string) bool {
	return sameProtocol(Protocol(), peer)
}

func sameProtocol(own, peer string) bool {
	if own == peer {
		return true
	}
	i, j := strings.LastIndexByte(own, '-'), strings.LastIndexByte(peer, '-')
	return i >= 0 && j >= 0 && own[:i] == peer[:j] &&
		(own[i+1:] == noModules || peer[j+1:] == noModules)
}
