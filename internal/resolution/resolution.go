// Package resolution carries a question resolved in this process from
// whoever resolved it (hitl's checkpointed channel, after its commit) to
// the runs of the process waiting for it (agent's StoreChannel), so that
// they need not read it again. It is internal so that no code outside
// tollgate can hand a waiting run a resolution the store does not hold.
package resolution

import (
	"sync/atomic"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

var handler atomic.Pointer[func(checkpoint.Store, *checkpoint.Question)]

// Handle sets what Tell calls: package agent's waiters.
func Handle(f func(checkpoint.Store, *checkpoint.Question)) { handler.Store(&f) }

// Tell says that q, as a Commit of store returned it, is resolved.
func Tell(store checkpoint.Store, q *checkpoint.Question) {
	if f := handler.Load(); f != nil {
		(*f)(store, q)
	}
}
