package anthropic

import (
	"sync"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/tollgate-ai/tollgate/agent"
)

// Models that think (on by default on current Claude models) require the
// thinking blocks of an assistant message that called tools to come back,
// unmodified, with that message while its results are sent. agent.Message
// has no field to carry them, so the provider keeps them in memory, keyed
// by the message's first tool call id, until they are evicted.
//
// This covers a run in one process. A run resumed after a restart, or on
// another replica, sends the message without them, which the API may
// refuse with a 400; carrying opaque provider data on agent.Message would
// close that gap.
const thinkingCacheSize = 1024

// thinkingBlock is a thinking or redacted_thinking block, as received.
type thinkingBlock struct {
	Redacted  bool
	Thinking  string
	Signature string
	Data      string
}

func (t thinkingBlock) param() sdk.ContentBlockParamUnion {
	if t.Redacted {
		return sdk.NewRedactedThinkingBlock(t.Data)
	}
	return sdk.NewThinkingBlock(t.Signature, t.Thinking)
}

// thinkingCache is a bounded map from tool call id to thinking blocks,
// evicting the oldest entry first.
type thinkingCache struct {
	mu    sync.Mutex
	max   int
	byID  map[string][]thinkingBlock
	order []string
}

func newThinkingCache(max int) *thinkingCache {
	return &thinkingCache{max: max, byID: make(map[string][]thinkingBlock)}
}

func (c *thinkingCache) put(calls []agent.ToolCall, blocks []thinkingBlock) {
	if len(calls) == 0 || calls[0].ID == "" {
		return
	}
	id := calls[0].ID
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byID[id]; !ok {
		c.order = append(c.order, id)
	}
	c.byID[id] = blocks
	for len(c.order) > c.max {
		delete(c.byID, c.order[0])
		c.order = c.order[1:]
	}
}

func (c *thinkingCache) get(calls []agent.ToolCall) []thinkingBlock {
	if len(calls) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID[calls[0].ID]
}
