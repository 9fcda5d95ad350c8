package cluster

import "sync/atomic"

// FailRenewals makes every replica's lease renewals fail while on is set.
func FailRenewals(on *atomic.Bool) {
	hook := func() error {
		if on.Load() {
			return errRenewTest
		}
		return nil
	}
	testHookRenew.Store(&hook)
}

var errRenewTest = errTest("renewals cut off by the test")

type errTest string

func (e errTest) Error() string { return string(e) }
