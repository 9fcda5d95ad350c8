// Package exectest writes programs that a test (or a benchmark) runs at
// once.
//
// A process that forks while another of its goroutines has a file open for
// writing gives the child that descriptor until the child's exec closes it
// (O_CLOEXEC acts at exec, not at fork). Running the file in that window
// fails with ETXTBSY, "text file busy". tollgate's own processes fork all
// the time — spare sandbox helpers start in the background, parallel tests
// start commands — so a program written with os.WriteFile and run at once
// failed now and then (CI: TestAttackProcShowsNoHostProcess).
//
// WriteProgram holds syscall.ForkLock for reading while the file is open:
// Go's fork takes it for writing, so no child of this process is made
// while the descriptor exists. Forks by other processes cannot see it.
package exectest

import (
	"os"
	"syscall"
)

// WriteProgram writes data to path, mode 0755, with no fork of this
// process able to inherit the open file.
func WriteProgram(path string, data []byte) error {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	return os.WriteFile(path, data, 0o755)
}
