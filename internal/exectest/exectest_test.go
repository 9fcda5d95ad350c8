package exectest_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/exectest"
)

// forkAll forks children until stop is closed, as a process with spare
// helpers and parallel commands does.
func forkAll(t *testing.T, stop chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				cmd := exec.Command("/bin/sh", "-c", "exit 0")
				if err := cmd.Run(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	return &wg
}

// runEach writes a program with write and runs it at once, n times, while
// the process forks, and counts the runs that found the file busy.
func runEach(t *testing.T, n int, write func(path string, data []byte) error) (busy int) {
	dir := t.TempDir()
	// Big enough that the write takes a while, as a copied test binary does.
	script := []byte("#!/bin/sh\nexit 0\n#" + string(make([]byte, 1<<20)) + "\n")
	stop := make(chan struct{})
	wg := forkAll(t, stop)
	defer func() { close(stop); wg.Wait() }()
	for i := range n {
		path := filepath.Join(dir, "p"+strconv.Itoa(i))
		if err := write(path, script); err != nil {
			t.Fatal(err)
		}
		err := exec.Command(path).Run()
		if errors.Is(err, syscall.ETXTBSY) {
			busy++
		} else if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	return busy
}

func TestWriteProgramIsNeverBusy(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 60
	}
	if busy := runEach(t, n, exectest.WriteProgram); busy > 0 {
		t.Fatalf("%d of %d programs were busy when run", busy, n)
	}
	if !testing.Short() {
		// The control, for the reader of -v: without the lock the same loop
		// finds programs busy (28 of 300 here), so the check above can fail.
		plain := func(path string, data []byte) error { return os.WriteFile(path, data, 0o755) }
		t.Logf("os.WriteFile: %d of %d programs busy when run", runEach(t, n, plain), n)
	}
}
