package policy

import (
	"crypto/sha256"
	"encoding/hex"
)

// Digest names a policy's source: the first 16 hex digits of the SHA-256
// of the file's bytes. Two replicas whose policies have one digest were
// given the same file; any other difference, a comment included, shows.
// It is recorded with every decision in the audit log, and replicas
// compare theirs (package cluster).
func Digest(source []byte) string {
	sum := sha256.Sum256(source)
	return hex.EncodeToString(sum[:8])
}

// Digest is the digest of the policy's source ([Digest]).
func (p *Policy) Digest() string { return p.digest }

// Digest is the digest of the policy in force.
func (r *Reloadable) Digest() string { return r.cur.Load().Digest() }
