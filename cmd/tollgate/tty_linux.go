package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// getTermios reads the terminal settings of f; it fails when f is not a
// terminal.
func getTermios(f *os.File) (*unix.Termios, error) {
	return unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
}

// keysMode turns off line editing and echo on the terminal so that the
// prompt can redraw its countdown while the person types (the prompt
// echoes what they type itself). Ctrl-C still sends SIGINT. It returns
// the function that puts the terminal back as it was.
func keysMode(f *os.File) (restore func(), err error) {
	old, err := getTermios(f)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Lflag &^= unix.ICANON | unix.ECHO
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(int(f.Fd()), unix.TCSETS, &t); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(int(f.Fd()), unix.TCSETS, old) }, nil
}

// flushInput drops what was typed and not yet read: keys pressed for a
// prompt that closed must not answer the next one.
func flushInput(f *os.File) {
	_ = unix.IoctlSetInt(int(f.Fd()), unix.TCFLSH, unix.TCIFLUSH)
}

// termWidth is the terminal's width in columns (80 when unknown).
func termWidth(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return 80
	}
	return int(ws.Col)
}

// dieWithParentGoRun makes this process get SIGTERM when its parent goes,
// when the parent is the go command: under "go run", killing go run must
// not leave the real binary running (and later executing an approved
// tool). SIGTERM stops a run resumable.
func dieWithParentGoRun() {
	ppid := os.Getppid()
	exe, err := os.Readlink("/proc/" + itoa(ppid) + "/exe")
	if err != nil || !isGoCommand(exe) {
		return
	}
	if unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGTERM), 0, 0, 0) != nil {
		return
	}
	// The parent may have gone before the signal was asked for.
	if os.Getppid() != ppid {
		os.Exit(143)
	}
}

// suspend stops the process group, as Ctrl-Z would have without a
// handler; it returns when the shell continues it (fg).
func suspend() {
	_ = unix.Kill(0, unix.SIGSTOP)
}
