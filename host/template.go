package host

import (
	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/clock"
)

// template is a template of runs with its tools by name.
type template struct {
	name  string
	match func(threadID string) bool
	cfg   agent.Config
	tools map[string]*agent.Tool
}

func newTemplate(name string, match func(string) bool, cfg agent.Config, c clock.Clock) *template {
	if cfg.Clock == nil {
		cfg.Clock = c
	}
	t := &template{name: name, match: match, cfg: cfg, tools: map[string]*agent.Tool{}}
	for _, tl := range cfg.Tools {
		if tl != nil {
			t.tools[tl.Name()] = tl
		}
	}
	return t
}

// tool is the template's tool of that name (Tools, else ToolFor's), or
// nil.
func (t *template) tool(name string) *agent.Tool {
	if tl := t.tools[name]; tl != nil {
		return tl
	}
	if t.cfg.ToolFor != nil {
		if tl := t.cfg.ToolFor(name); tl != nil && tl.Name() == name {
			return tl
		}
	}
	return nil
}

// templateOf is the template a thread runs with.
func (h *Host) templateOf(threadID string) *template {
	for _, k := range h.kinds {
		if k.match(threadID) {
			return k
		}
	}
	return h.template
}

func (h *Host) newAgent(threadID string) (*agent.Agent, error) {
	return h.templateOf(threadID).newAgent(threadID, h)
}

func (t *template) newAgent(threadID string, h *Host) (*agent.Agent, error) {
	cfg := t.cfg
	cfg.ThreadID = threadID
	cfg.Checkpointer = h.store
	cfg.Channel = h.parkCh
	return agent.New(cfg)
}
