package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/examples/policies"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/mcpgate"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/policy/learn"
	"github.com/tollgate-ai/tollgate/server"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

// agentFlags are the flags that say what a run is made of: the model, the
// policy and the bash tool. serve takes answers and runs with them, and
// questions answer checks an edit with the same tools and policy, so a
// process that takes an answer checks it as the run would.
type agentFlags struct {
	model      string
	policyFile string
	dir        string
	cmdTimeout time.Duration
	sandbox    sandboxFlags
	reload     string
	// masked are tollgate's own state files, kept out of confined
	// commands' view of the machine (bash.Options.Masked).
	masked []string
	// loosened hears of each policy reload that may allow more.
	loosened func(file string, looser []string)
}

// register adds the flags to fs (a *flagSet or a *flag.FlagSet); withModel
// adds --model too. Each usage has an example, so a command's help need
// not give these flags one of its own.
func (f *agentFlags) register(fs flagDefiner, withModel bool) {
	if withModel {
		fs.StringVar(&f.model, "model", envDefault("TOLLGATE_MODEL", "demo"), "the `model`: demo (offline), anthropic:MODEL or openai:MODEL (OPENAI_BASE_URL for Ollama, vLLM...), e.g. --model anthropic:claude-sonnet-4-6 [TOLLGATE_MODEL]")
	}
	fs.StringVar(&f.policyFile, "policy", envDefault("TOLLGATE_POLICY", ""), "policy `file`, reloaded when it changes (default, or builtin: the built-in sandbox policy, examples/policies/sandbox.yaml), e.g. --policy policy.yaml [TOLLGATE_POLICY]")
	fs.StringVar(&f.dir, "dir", envDefault("TOLLGATE_DIR", "."), "working `directory` of the bash tool, e.g. --dir ~/project [TOLLGATE_DIR]")
	fs.DurationVar(&f.cmdTimeout, "cmd-timeout", time.Minute, "time limit of one bash command, e.g. --cmd-timeout 5m")
	policyReloadFlag(fs, &f.reload)
	f.sandbox.register(fs)
}

// policyReloadFlag adds --policy-reload to fs.
func policyReloadFlag(fs flagDefiner, mode *string) {
	fs.StringVar(mode, "policy-reload", envDefault("TOLLGATE_POLICY_RELOAD", "auto"),
		"when the policy file is read again: auto (when it changes) or manual (only on SIGHUP: kill -HUP PID; a file anyone but you rewrites never takes effect by itself), e.g. --policy-reload manual [TOLLGATE_POLICY_RELOAD]")
}

// policyWatch says how a policy file is reloaded, and who hears of a
// reload that may allow more than the policy it replaced.
type policyWatch struct {
	// manual: reloaded on SIGHUP only, never because the file changed.
	manual bool
	// loosened, when set, hears of each such reload (the log always
	// does).
	loosened func(file string, looser []string)
}

// parsePolicyReload reads --policy-reload.
func parsePolicyReload(mode string) (manual bool, err error) {
	switch mode {
	case "auto", "":
		return false, nil
	case "manual":
		return true, nil
	}
	return false, fmt.Errorf("--policy-reload %q: want auto (reload when the file changes) or manual (only on SIGHUP)", mode)
}

// template builds the agent configuration every run uses (agentOf). The
// policy file, if any, is reloaded as watch says until ctx ends; the
// rules learned from answers in the store answer for its asks. An error
// is a flag's (exit status 2).
func (f *agentFlags) template(ctx context.Context, store checkpoint.Store, log *slog.Logger, watch policyWatch) (agent.Config, *loadedPolicy, error) {
	spec := f.model
	if spec == "" {
		spec = "demo"
	}
	provider, model, err := providerFor(spec)
	if err != nil {
		return agent.Config{}, nil, withCode(2, err)
	}
	lp, err := loadPolicy(ctx, f.policyFile, log, watch, learningOptions(store, f.dir, log))
	if err != nil {
		return agent.Config{}, nil, withCode(2, err)
	}
	cfg, err := agentOf(store, provider, model, lp, &f.sandbox, bash.Options{Dir: f.dir, Timeout: f.cmdTimeout, Masked: f.masked}, log)
	return cfg, lp, err
}

// learningOptions are the policy options of a process that runs calls on
// store with the bash tool in dir: the rules learned from answers in the
// store answer for the policy's asks, and a call works in dir (what a
// rule learned for a project is scoped to). A store that keeps no rules:
// none.
func learningOptions(store checkpoint.Store, dir string, log *slog.Logger) *policy.Options {
	o := policyOptions()
	if abs, err := filepath.Abs(dir); err == nil {
		o.Dir = abs
	}
	if src, err := learn.NewSource(store); err == nil {
		o.Learned = src
	} else if log != nil {
		log.Warn("tollgate: " + err.Error() + ": no rule learned from an answer allows anything")
	}
	return o
}

// bashAgent is the run template of serve and run: the model, the bash tool
// and the approval middleware on the store's every-thread channel.
func bashAgent(store checkpoint.Store, provider agent.Provider, model agent.Model, bashOpts *bash.Options, approval hitl.Policy, log *slog.Logger) agent.Config {
	// An answer holds in the directory the reviewer saw: a run resumed by
	// a serve with another --dir does not run what was approved here.
	approve := hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(store, "", nil), approval)
	if dir, err := filepath.Abs(bashOpts.Dir); err == nil {
		approve.InDir(dir)
	}
	return agent.Config{
		Provider:     provider,
		Model:        model,
		SystemPrompt: "You are a helpful assistant with access to a bash shell. Every command is checked by a policy and may need a person's approval.",
		Tools:        []*agent.Tool{bash.New(bashOpts)},
		Middleware:   []agent.Middleware{approve},
		Logger:       log,
	}
}

// builtinPolicy names the built-in sandbox policy where a --policy file
// is expected (run asks every call without --policy).
const builtinPolicy = "builtin"

// loadedPolicy is a policy file (or the built-in policy) as the agent
// uses it: the approval policy, the bash tool's Decide, its name, and its
// digest (of the file in force: recorded with each decision, compared
// between replicas).
type loadedPolicy struct {
	approval hitl.Policy
	decide   func(context.Context, json.RawMessage) (string, error)
	name     string
	digest   func() string
	// current is the policy in force (reloads included): what rules
	// learned from answers answer for.
	current func() *policy.Policy
}

// loadPolicy loads the policy file (reloaded as w says) or the built-in
// sandbox policy, with opts (nil: policyOptions()).
func loadPolicy(ctx context.Context, file string, log *slog.Logger, w policyWatch, opts *policy.Options) (*loadedPolicy, error) {
	if opts == nil {
		opts = policyOptions()
	}
	if file == "" || file == builtinPolicy {
		p, err := policy.Parse(policies.SandboxName, policies.Sandbox, opts)
		if err != nil {
			return nil, err
		}
		return &loadedPolicy{approval: p.HITL(), decide: p.SandboxFor("bash"), name: policies.SandboxName,
			current: func() *policy.Policy { return p }, digest: p.Digest}, nil
	}
	rp, err := watchedPolicyWith(ctx, file, opts, log, "tollgate: policy reloaded", w)
	if err != nil {
		return nil, err
	}
	return &loadedPolicy{approval: rp.HITL(), decide: rp.SandboxFor("bash"), name: file, current: rp.Policy, digest: rp.Digest}, nil
}

// watchedPolicy loads a policy file as the tools that run here need it
// (policyOptions) and reloads it until ctx ends: when it changes, or with
// w.manual on SIGHUP only. A reload that fails keeps the previous policy
// and says why.
func watchedPolicy(ctx context.Context, file string, log *slog.Logger, reloaded string, w policyWatch) (*policy.Reloadable, error) {
	return watchedPolicyWith(ctx, file, policyOptions(), log, reloaded, w)
}

// watchedPolicyWith is watchedPolicy with the policy's options.
func watchedPolicyWith(ctx context.Context, file string, opts *policy.Options, log *slog.Logger, reloaded string, w policyWatch) (*policy.Reloadable, error) {
	rp, err := policy.NewReloadable(file, opts)
	if err != nil {
		return nil, err
	}
	report := func(changed bool, err error) {
		if err != nil {
			log.Error("tollgate: policy not reloaded, keeping the previous one", "file", file, "err", err)
		} else if changed {
			log.Info(reloaded, "file", file)
			// A policy file a tool could write would otherwise loosen
			// the policy silently (issue 21's attack C).
			if looser := rp.Loosened(); len(looser) > 0 {
				log.Warn("tollgate: the reloaded policy may allow more than the one it replaced: check who changed "+file, "file", file, "looser", strings.Join(looser, "; "))
				if w.loosened != nil {
					w.loosened(file, looser)
				}
			}
		}
	}
	if !w.manual {
		go rp.Watch(ctx, time.Second, report)
		return rp, nil
	}
	log.Info("tollgate: the policy is reloaded on SIGHUP only (--policy-reload manual)", "file", file, "pid", os.Getpid())
	onHUP(ctx, func() {
		changed, err := rp.Reload()
		if err == nil && !changed {
			log.Info("tollgate: SIGHUP: the policy file is as it was", "file", file)
		}
		report(changed, err)
	})
	return rp, nil
}

// holdHUP keeps SIGHUP from stopping a server told to reload its
// policies on it (--policy-reload manual) until ctx ends: with the
// built-in policies there is no file to watch, no handler of the
// watchers' own, and the signal's default action would end the process
// an operator only meant to reload.
func holdHUP(ctx context.Context, log *slog.Logger) {
	onHUP(ctx, func() { log.Info("tollgate: SIGHUP: each policy file is read again (a built-in policy has none)") })
}

// onHUP calls do on each SIGHUP until ctx ends.
func onHUP(ctx context.Context, do func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				do()
			}
		}
	}()
}

// noticeBoard is what serve's page tells every reviewer of the server
// itself (server.Config.Notices): how its tools are confined, and the
// latest reloads that loosened its policy.
type noticeBoard struct {
	mu       sync.Mutex
	fixed    []server.Notice
	loosened []server.Notice
	// more, when set, adds notices of the moment (dead notifications).
	more func() []server.Notice
}

// keptLoosened is how many loosening reloads the page shows, the latest.
const keptLoosened = 5

// policyLoosened is a policyWatch's loosened.
func (b *noticeBoard) policyLoosened(file string, looser []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	what := strings.Join(looser, "; ")
	if r := []rune(what); len(r) > 400 {
		what = string(r[:400]) + "…"
	}
	b.loosened = append(b.loosened, server.Notice{Code: "policy_loosened", At: time.Now(),
		Message: "The policy file " + file + " was reloaded and may allow more than the policy it replaced (" + what +
			"): calls it allows run without asking anyone. Check who changed it."})
	if len(b.loosened) > keptLoosened {
		b.loosened = slices.Delete(b.loosened, 0, len(b.loosened)-keptLoosened)
	}
}

func (b *noticeBoard) list() []server.Notice {
	b.mu.Lock()
	out := append(slices.Clone(b.fixed), b.loosened...)
	more := b.more
	b.mu.Unlock()
	if more != nil {
		out = append(out, more()...)
	}
	return out
}

// mcpFlags are the --mcp and --mcp-config flags of run and serve: MCP
// servers whose tools the agent gets beside bash.
type mcpFlags struct {
	servers    []string // the --mcp values, as given
	configFile string
}

// register adds the flags to fs; each usage has an example.
func (f *mcpFlags) register(fs *flag.FlagSet) {
	fs.Func("mcp", "an MCP server, `NAME=COMMAND [ARGS...]` on stdio or NAME=URL, repeatable; its tools are named mcp__<server>__<tool> and pass the policy like bash, e.g. --mcp 'fs=npx -y @modelcontextprotocol/server-filesystem /tmp/work'",
		func(s string) error { f.servers = append(f.servers, s); return nil })
	fs.StringVar(&f.configFile, "mcp-config", "", "MCP servers from a JSON `file` in the {\"mcpServers\": {...}} format of desktop assistants and IDEs, beside those of --mcp, e.g. --mcp-config mcp.json")
}

// configs are the servers of --mcp-config, then those of --mcp; a server
// named twice is an error.
func (f *mcpFlags) configs() ([]mcpgate.ServerConfig, error) {
	var out []mcpgate.ServerConfig
	if f.configFile != "" {
		c, err := mcpgate.LoadConfig(f.configFile)
		if err != nil {
			return nil, err
		}
		out = c
	}
	for _, s := range f.servers {
		c, err := mcpgate.ParseFlag(s)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if err := mcpgate.CheckNames(out); err != nil {
		return nil, fmt.Errorf("%w (give each --mcp and each server of --mcp-config a name of its own)", err)
	}
	return out, nil
}

// connectMCP connects to the servers (none: nil servers, no error) and
// reports each tool left out as a warning, one line each. log gets the
// servers' restarts, and a warning when a server's tools change: the
// agent keeps those it was given at start.
func connectMCP(ctx context.Context, configs []mcpgate.ServerConfig, log *slog.Logger, warn func(string)) (*mcpgate.Servers, error) {
	if len(configs) == 0 {
		return nil, nil
	}
	var mu sync.Mutex
	var atStart map[string][]string // tool names by server, once connected
	var servers *mcpgate.Servers
	changed := func(server string) {
		mu.Lock()
		defer mu.Unlock()
		if atStart == nil {
			return
		}
		var now []string
		if u := servers.Get(server); u != nil {
			for _, t := range u.Tools() {
				now = append(now, t.Name)
			}
		}
		if !slices.Equal(now, atStart[server]) {
			log.Warn("tollgate: MCP server "+server+" changed its tools; the agent keeps those it had at start until tollgate restarts", "at_start", atStart[server], "now", now)
		}
	}
	servers, err := mcpgate.ConnectAll(ctx, configs, &mcpgate.Options{Logger: log, ToolsChanged: changed})
	if err != nil {
		return nil, err
	}
	mu.Lock()
	atStart = map[string][]string{}
	for _, u := range servers.Upstreams() {
		for _, t := range u.Tools() {
			atStart[u.Name()] = append(atStart[u.Name()], t.Name)
		}
	}
	mu.Unlock()
	for _, p := range servers.Problems() {
		warn("tollgate: MCP " + p)
	}
	return servers, nil
}

// withMCP adds the servers' tools to the agent's; a tool name taken twice
// is an error.
func withMCP(cfg agent.Config, servers *mcpgate.Servers) (agent.Config, error) {
	if servers == nil {
		return cfg, nil
	}
	seen := map[string]bool{}
	for _, t := range cfg.Tools {
		seen[t.Name()] = true
	}
	tools := slices.Clone(cfg.Tools)
	for _, t := range servers.Tools() {
		if seen[t.Name()] {
			return cfg, fmt.Errorf("mcp: tool %s of server %v is named as another tool of the agent; rename the server", t.Name(), t.Annotations()["mcp_server"])
		}
		seen[t.Name()] = true
		tools = append(tools, t)
	}
	cfg.Tools = tools
	return cfg, nil
}

// mcpSummary says how many MCP tools the agent has from which servers:
// "9 MCP tools: 6 from github, 3 from docs".
func mcpSummary(servers *mcpgate.Servers) string {
	total := 0
	var from []string
	for _, u := range servers.Upstreams() {
		n := len(u.Tools())
		total += n
		from = append(from, fmt.Sprintf("%d from %s", n, u.Name()))
	}
	return fmt.Sprintf("%s: %s", plural(total, "MCP tool"), strings.Join(from, ", "))
}
