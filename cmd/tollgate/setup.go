package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/examples/policies"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/policy"
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
	f.sandbox.register(fs)
}

// template builds the agent configuration every run uses. The policy file,
// if any, is watched for changes until ctx ends.
func (f *agentFlags) template(ctx context.Context, store checkpoint.Store, log *slog.Logger) (agent.Config, string, error) {
	spec := f.model
	if spec == "" {
		spec = "demo"
	}
	provider, model, err := providerFor(spec)
	if err != nil {
		return agent.Config{}, "", err
	}
	approval, decide, name, err := loadPolicy(ctx, f.policyFile, log)
	if err != nil {
		return agent.Config{}, "", err
	}
	bashOpts, err := f.sandbox.options(f.dir, bash.Options{Timeout: f.cmdTimeout}, decide)
	if err != nil {
		return agent.Config{}, "", err
	}
	return bashAgent(store, provider, model, bashOpts, approval, log), name, nil
}

// bashAgent is the run template of serve and run: the model, the bash tool
// and the approval middleware on the store's every-thread channel.
func bashAgent(store checkpoint.Store, provider agent.Provider, model agent.Model, bashOpts *bash.Options, approval hitl.Policy, log *slog.Logger) agent.Config {
	return agent.Config{
		Provider:     provider,
		Model:        model,
		SystemPrompt: "You are a helpful assistant with access to a bash shell. Every command is checked by a policy and may need a person's approval.",
		Tools:        []*agent.Tool{bash.New(bashOpts)},
		Middleware:   []agent.Middleware{hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(store, "", nil), approval)},
		Logger:       log,
	}
}

// builtinPolicy names the built-in sandbox policy where a --policy file
// is expected (run asks every call without --policy).
const builtinPolicy = "builtin"

// loadPolicy loads the policy file (watched for changes) or the built-in
// sandbox policy, and returns it with the bash tool's Decide.
func loadPolicy(ctx context.Context, file string, log *slog.Logger) (hitl.Policy, func(context.Context, json.RawMessage) (string, error), string, error) {
	if file == "" || file == builtinPolicy {
		p, err := policy.Parse(policies.SandboxName, policies.Sandbox, policyOptions())
		if err != nil {
			return nil, nil, "", err
		}
		return p.HITL(), p.SandboxFor("bash"), policies.SandboxName, nil
	}
	rp, err := policy.NewReloadable(file, policyOptions())
	if err != nil {
		return nil, nil, "", err
	}
	go rp.Watch(ctx, time.Second, func(changed bool, err error) {
		if err != nil {
			log.Error("tollgate: policy not reloaded, keeping the previous one", "file", file, "err", err)
		} else if changed {
			log.Info("tollgate: policy reloaded", "file", file)
		}
	})
	return rp.HITL(), rp.SandboxFor("bash"), file, nil
}
