package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrPolicyMismatch: Config.RequireSamePolicy is set and a live replica
// decides by another policy than this one.
var ErrPolicyMismatch = errors.New("cluster: replicas decide by different policies")

// Each replica keeps a row in the store's replicas table with the digest
// of its policy, renewed with each rescue round (in its transaction: no
// cost of its own); a replica seen within replicaLive is live.

// beat renews this replica's row, forgets replicas gone for an hour, and
// reads the live replicas' policies.
const (
	beatSelf = `INSERT INTO replicas (id, policy_digest, started_at, seen_at) VALUES ($1, $2, now(), now())
ON CONFLICT (id) DO UPDATE SET policy_digest = excluded.policy_digest, seen_at = now()`
	beatForget = `DELETE FROM replicas WHERE seen_at < now() - interval '1 hour'`
	beatRead   = `SELECT id, policy_digest FROM replicas WHERE id <> $1 AND seen_at > now() - $2 * interval '1 millisecond' ORDER BY id`
)

// replicaLive is how recently a replica renewed its row to count as live:
// two leases' time (it renews about every LeaseTTL/2 to 3/4).
func (c *Cluster) replicaLive() time.Duration { return 2 * c.ttl }

// policyDigest is this replica's policy digest now ("" for none).
func (c *Cluster) policyDigestNow() string {
	if c.policyDigest == nil {
		return ""
	}
	return c.policyDigest()
}

// beat renews this replica's row in tx and compares the live replicas'
// policies with its own: a change in who disagrees is logged (an error
// while they do), and kept for PolicyMismatch and the metrics.
func (c *Cluster) beat(ctx context.Context, tx pgx.Tx) error {
	mine := c.policyDigestNow()
	if _, err := tx.Exec(ctx, beatSelf, c.id, mine); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, beatForget); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, beatRead, c.id, c.replicaLive().Milliseconds())
	if err != nil {
		return err
	}
	type replica struct{ id, digest string }
	live, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (replica, error) {
		var r replica
		err := row.Scan(&r.id, &r.digest)
		return r, err
	})
	if err != nil {
		return err
	}
	var differ []string
	for _, r := range live {
		if mine != "" && r.digest != "" && r.digest != mine {
			differ = append(differ, fmt.Sprintf("replica %s decides by policy %s", r.id, r.digest))
		}
	}
	c.mu.Lock()
	before := c.mismatch
	c.mismatch, c.myDigest = differ, mine
	c.mu.Unlock()
	switch {
	case len(differ) > 0 && !slices.Equal(differ, before):
		c.log.Error("tollgate: replicas decide by different policies: a call is allowed, asked about or blocked depending on which replica drives its run; give every replica the same policy file",
			"replica", c.id, "policy", mine, "others", strings.Join(differ, "; "))
	case len(differ) == 0 && len(before) > 0:
		c.log.Info("tollgate: every live replica decides by the same policy again", "policy", mine)
	}
	return nil
}

// beatNow renews this replica's row in a transaction of its own.
func (c *Cluster) beatNow(ctx context.Context) error {
	return pgx.BeginTxFunc(ctx, c.store.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error { return c.beat(ctx, tx) })
}

// PolicyMismatch says which live replicas decide by another policy than
// this one, as of this replica's last look (every LeaseTTL/2 or so): nil
// when they all agree (or the policies are not named: Config.PolicyDigest).
func (c *Cluster) PolicyMismatch() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mismatch) == 0 {
		return nil
	}
	out := make([]string, len(c.mismatch))
	for i, m := range c.mismatch {
		out[i] = m + " (this replica: " + c.myDigest + ")"
	}
	return out
}

// leave deletes this replica's row, once it stops.
func (c *Cluster) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := c.store.Pool().Exec(ctx, `DELETE FROM replicas WHERE id = $1`, c.id); err != nil {
		c.log.Debug("tollgate: forgetting this replica in the store (its row expires instead)", "err", err)
	}
}
