package bash

import (
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// WithoutPidNamespace makes Check choose among the namespace sets without
// a PID namespace, as on a kernel or in a container that refuses them, so
// that a test reaches the supervisor of confined commands. Call it before
// the process's first Check.
func WithoutPidNamespace() {
	for i := range nsChoices {
		nsChoices[i].Flags &^= unix.CLONE_NEWPID
	}
}

// SuperviseForTest makes the supervisors of this process's commands give
// up after budget (zero: the default), and treat the processes whose
// command name is spare as ones they may not signal (empty: none). Not
// safe while a command runs.
func SuperviseForTest(budget time.Duration, spare string) {
	supervisorTest.budget, supervisorTest.spare = budget, spare
}

// FindHelper is findHelper: the helper binary a process at self would
// start, and why not HelperName next to it.
var FindHelper = findHelper

// HelperChildren are the children of pid that run the sandbox helper (a
// spare, waiting for its configuration, among them).
func HelperChildren(pid int) []int {
	var pids []int
	for _, c := range children(pid) {
		if strings.HasPrefix(c.cmdline, "tollgate-sandbox-helper\x00") {
			pids = append(pids, c.pid)
		}
	}
	return pids
}
