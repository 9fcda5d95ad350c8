package bash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/tollgate-ai/tollgate/internal/sandboxhelper"
)

// stopBudget bounds how long the supervisor keeps killing once it has
// begun: a process it may not signal, or one stuck in the kernel, is left
// after it (and the command's result says so).
const stopBudget = 5 * time.Second

// supervisorTest, set by a test (export_linux_test.go), replaces
// stopBudget and names processes the supervisor treats as ones it may
// not signal, so that a test can see what is left reported.
var supervisorTest struct {
	budget time.Duration
	spare  string
}

// supervisedCommand prepares the supervisor of c (the helper binary, or
// this one, in mode sandboxhelper.SuperviseMode: package
// internal/sandboxhelper says how it keeps a command's tree from
// outliving it), started in dir; tmp, if set, makes the confined
// command's private TMPDIR once the supervisor is started (see
// helperCommand). Cancel
// asks it to kill the tree (it exits when that is done); failed names it
// in errors. The supervisor reports on a pipe of its own (fd 5) how many
// processes it could not stop: stopped, called after Wait, turns that
// into an error.
func supervisedCommand(ctx context.Context, c sandboxhelper.SuperviseConfig, dir, failed string, tmp func() (string, error)) (command, error) {
	c.Protocol, c.Parent = sandboxhelper.Protocol(), os.Getpid()
	c.Budget, c.Spare = stopBudget, supervisorTest.spare
	if supervisorTest.budget > 0 {
		c.Budget = supervisorTest.budget
	}
	data := func() ([]byte, error) {
		if tmp != nil && c.Confined != nil {
			var err error
			if c.Confined.Tmp, err = tmp(); err != nil {
				return nil, err
			}
		}
		return json.Marshal(c)
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		return command{}, err
	}
	cmd, after, err := selfCommand(ctx, sandboxhelper.SuperviseMode, data, dir,
		&syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}, failed)
	if err != nil {
		repR.Close()
		repW.Close()
		return command{}, err
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, repW) // fd 5
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	// The supervisor exits when it is done or its budget is spent: the
	// WaitDelay that follows a cancellation must not kill it before (that
	// would leave the tree to init, and the result would not say).
	cmd.WaitDelay = c.Budget + 2*time.Second
	return command{
		Cmd: cmd,
		after: func(start error) error {
			repW.Close()
			if start != nil {
				repR.Close()
			}
			return after(start)
		},
		stopped: func() error {
			defer repR.Close()
			// It has exited: only a process between its fork and its exec
			// may hold the pipe a moment longer.
			_ = repR.SetReadDeadline(time.Now().Add(time.Second))
			msg, _ := io.ReadAll(repR)
			left, err := strconv.Atoi(string(msg))
			switch {
			case err != nil:
				return errors.New("could not stop every process the command started: its supervisor was killed before it was done")
			case left > 0:
				return fmt.Errorf("could not stop every process the command started: %d left", left)
			}
			return nil
		},
	}, nil
}
