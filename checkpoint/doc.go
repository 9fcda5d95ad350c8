// Package checkpoint defines tollgate's durable records and the [Store]
// interface every storage backend implements: threads with their messages
// and a version for optimistic concurrency, tool call states (so that a
// resumed run never runs a tool twice), questions for people (compare-and-set
// from pending: the first answer wins), and an append-only event log.
//
// Stores: [github.com/tollgate-ai/tollgate/checkpoint/memory] for tests and
// examples; checkpoint/sqlite (the embedded default) and checkpoint/postgres
// for real use. The conformance suite in checkpoint/checkpointtest is the
// definition of a store.
//
// Errors are compared with [errors.Is]: [ErrNotFound] (which wraps
// sql.ErrNoRows), [ErrConflict], [ErrExpired], [ErrBadCursor].
package checkpoint
