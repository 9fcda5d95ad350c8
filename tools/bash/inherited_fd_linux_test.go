package bash

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestConfinedCommandGetsNoInheritedDescriptor: a descriptor the process
// got without close-on-exec from whoever started it (a shell's exec 7<,
// a socket passed by systemd, a job server's pipe) is not the command's:
// Go's exec leaves descriptors beyond the ones it passes alone, and the
// helper execs the shell without closing them, so a read-only command
// reads through it a file its view does not hold.
func TestConfinedCommandGetsNoInheritedDescriptor(t *testing.T) {
	if err := Check().Enforceable(ReadOnly); err != nil {
		t.Skip(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("outside the view"), 0o600); err != nil {
		t.Fatal(err)
	}
	// As if inherited: opened without O_CLOEXEC.
	fd, err := unix.Open(secret, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	r, err := Run(context.Background(), &Options{Dir: t.TempDir(), Profile: ReadOnly},
		fmt.Sprintf("cat <&%d 2>&1 || true", fd))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.Stdout, "outside the view") {
		t.Fatalf("a read-only command read through descriptor %d, left open by the process: %q", fd, r.Stdout)
	}
}
