package cluster_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/cluster"
)

// startWithPolicy starts a replica whose policy has the digest, and
// returns Start's error (the replica stopped again) or the replica.
func (w *world) startWithPolicy(t *testing.T, digest string, require bool) (*replica, error) {
	t.Helper()
	return w.startReplica(t, cluster.Config{LeaseTTL: 2 * time.Second, ReconcileEvery: -1,
		PolicyDigest: func() string { return digest }, RequireSamePolicy: require}, time.Hour)
}

// Issue 22 item 7: replicas that decide by different policies are found
// out — each says so (PolicyMismatch: tollgate serve's /readyz, its log,
// a metric) — and a replica told to refuse (RequireSamePolicy) does not
// start beside one that decides otherwise; once that one is gone, it
// does. Before, a blocking replica blocked calls a person had approved
// and a lenient one allowed what the others asked about, silently.
func TestReplicasWithDifferentPolicies(t *testing.T) {
	w := newWorld(t)
	a, err := w.startWithPolicy(t, "aaaa", false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.startWithPolicy(t, "bbbb", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*replica{a, b} {
		eventually(t, "each replica to see the other's policy differ", 10*time.Second, func() (bool, error) {
			return len(r.c.PolicyMismatch()) == 1, nil
		})
	}
	if got := strings.Join(a.c.PolicyMismatch(), ""); !strings.Contains(got, b.c.ID()) || !strings.Contains(got, "bbbb") || !strings.Contains(got, "aaaa") {
		t.Errorf("a says %q: want b's name, its policy and a's", got)
	}
	if _, err := w.startWithPolicy(t, "aaaa", true); !errors.Is(err, cluster.ErrPolicyMismatch) || !strings.Contains(err.Error(), "bbbb") {
		t.Errorf("a replica that requires one policy, beside one with another: %v, want ErrPolicyMismatch naming it", err)
	}
	b.stop(t) // gone: its row with it
	eventually(t, "a to see every replica agree", 10*time.Second, func() (bool, error) {
		return len(a.c.PolicyMismatch()) == 0, nil
	})
	if _, err := w.startWithPolicy(t, "aaaa", true); err != nil {
		t.Errorf("a replica with a's policy, b gone: %v", err)
	}
}
