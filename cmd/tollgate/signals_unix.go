//go:build unix

package main

import (
	"os"
	"syscall"
)

// sigStop is the terminal's stop signal (Ctrl-Z), which the prompt of
// tollgate run handles itself.
var sigStop os.Signal = syscall.SIGTSTP
