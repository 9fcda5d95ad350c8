package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/storeurl"
	"github.com/tollgate-ai/tollgate/mcpgate"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

func init() {
	register("run", "run a task; tool calls are approved in the terminal", runCmd)
}

// Exit codes of tollgate run.
const (
	exitFinished = 0
	exitFailed   = 1
	exitUsage    = 2
	// exitWaiting: --no-wait, and the run waits for answers (parked in
	// the store; it goes on when they come, driven by a tollgate serve or
	// a tollgate run --resume on the same store).
	exitWaiting = 3
	// exitInterrupted: Ctrl-C; the pending questions were aborted.
	exitInterrupted = 130
	// exitTerminated: SIGTERM or SIGHUP; the run was stopped resumable.
	exitTerminated = 143
)

const runHelp = `usage: tollgate run [flags] "task"

Runs the task with the bash tool and asks you, here, to approve the tool
calls the policy does not allow by itself. Without a model configured,
the offline demo model runs each line of the task that starts with "$ "
as a bash command, so this works with no network:

  tollgate run $'list files\n$ ls\n$ rm -r /tmp/scratch'

At the prompt: a (approve), d (deny; you are asked for a reason), e (edit
the arguments: in $EDITOR if set, else as one line of JSON). The prompt
counts down to the question's deadline, and closes by itself when the
question is answered elsewhere (tollgate questions answer, the reviewer
page, the API) or times out.

Ctrl-C aborts the run: every pending call gets a deny and the thread ends
with an "aborted" message (a second Ctrl-C exits at once). SIGTERM stops
the run so that it can go on later with --resume (on a durable --store).
run drives its own thread only: other unfinished runs of the store (a
serve's, another run's) are left to their hosts, so an approved call runs
in the directory and under the policy it was asked in.

When stdin is not a terminal (a pipe, CI), answers are read from it one
per line; once it ends, the pending questions are printed with their ids
and the run waits for answers from elsewhere, or, with --no-wait, exits.

exit codes: 0 finished, 1 failed, 2 usage, 3 waiting for answers
(--no-wait), 130 interrupted (Ctrl-C), 143 stopped (SIGTERM).

examples:
  tollgate run --dir /tmp/work '$ ls -la'
  tollgate run --policy examples/policies/sandbox.yaml --sandbox workspace-write '$ touch made-here'
  tollgate run --store sqlite:/tmp/t.db --thread t1 --approval-timeout 10m --cmd-timeout 30s '$ make test'
  tollgate run --store sqlite:/tmp/t.db --thread t1 --resume
  tollgate run --store sqlite:/tmp/t.db --no-wait --by ci-bot '$ git status' < /dev/null
  tollgate run --model anthropic:claude-sonnet-4-6 --allow-all 'what is in this directory?'
`

func runCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", runHelp, stderr)
	dir := fs.String("dir", ".", "working directory of the bash tool (e.g. --dir /tmp/work)")
	timeout := fs.Duration("approval-timeout", 5*time.Minute, "time to answer each approval; 0: no deadline (e.g. --approval-timeout 10m)")
	cmdTimeout := fs.Duration("cmd-timeout", time.Minute, "time limit of one bash command (e.g. --cmd-timeout 30s)")
	allowAll := fs.Bool("allow-all", false, "run every tool call without asking (dangerous; e.g. --allow-all)")
	policyFile := fs.String("policy", "", "a policy file (see policy/README.md), reloaded when it changes, or builtin for the built-in sandbox policy that serve uses; without one every call is asked (e.g. --policy builtin, --policy policy.yaml)")
	thread := fs.String("thread", "", "thread id (default: a new one; e.g. --thread t1)")
	modelSpec := fs.String("model", envDefault("TOLLGATE_MODEL", "demo"), "demo (offline), anthropic:MODEL or openai:MODEL (OPENAI_BASE_URL for Ollama, vLLM...) [TOLLGATE_MODEL] (e.g. --model openai:gpt-4.1)")
	storeURL := fs.String("store", envDefault("TOLLGATE_STORE", "memory"), "where threads and questions live: memory, sqlite:PATH or postgres://... [TOLLGATE_STORE] (e.g. --store sqlite:/tmp/t.db)")
	resume := fs.Bool("resume", false, "continue the thread's unfinished run instead of starting one; needs --thread and a durable --store (e.g. --resume)")
	noWait := fs.Bool("no-wait", false, "exit with code 3 as soon as the run waits for answers, without asking here (at a terminal too); they can be given with tollgate questions answer, and the run goes on under tollgate serve or run --resume; needs a durable --store (e.g. --no-wait)")
	by := fs.String("by", currentUser(), "who answers at this terminal, recorded with each answer (e.g. --by alice)")
	var sandbox sandboxFlags
	sandbox.register(fs.FlagSet)
	var mcpf mcpFlags
	mcpf.register(fs.FlagSet)
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	// This process never confines itself (no Landlock domain, seccomp
	// filter, ... of its own): the bash tool may start its helpers ahead.
	bash.UseSpareHelpers(true)
	if fs.NArg() == 0 && !*resume {
		fmt.Fprint(stderr, "tollgate run: give the task, or --resume\n\n")
		printHelp(fs, stderr)
		return exitUsage
	}
	if problem := runFlagsProblem(*resume, *noWait, *thread, *storeURL, *by); problem != "" {
		fmt.Fprintln(stderr, "tollgate:", problem)
		return exitUsage
	}
	mcpConfigs, err := mcpf.configs()
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return exitUsage
	}
	task := strings.Join(fs.Args(), " ")
	if *thread == "" {
		*thread = time.Now().UTC().Format("run-20060102-150405.000")
	}

	provider, model, err := runModel(*modelSpec)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return exitUsage
	}
	// The run outlives ctx's cancellation: a signal is handled below (an
	// abort needs the store after Ctrl-C), and ctx ending otherwise stops
	// the run resumable, as SIGTERM does.
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	// A broken edit of the policy file keeps the policy in force and says
	// why; the MCP servers' restarts and problems are said too.
	w := newWiring("tollgate", stderr, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	defer w.close()
	r := &running{storeURL: *storeURL, policyFile: *policyFile, dir: *dir, allowAll: *allowAll, timeout: *timeout,
		cmdTimeout: *cmdTimeout, thread: *thread, provider: provider, model: model, sandbox: &sandbox, mcpConfigs: mcpConfigs}
	if err := r.wire(ctx, runCtx, w); err != nil {
		return w.fail(err)
	}
	t := newTerminal(r.h, *thread, *storeURL, *by, stdin, stdout, stderr)
	t.noWait, t.resumed = *noWait, *resume
	if r.lp.current != nil {
		t.learning = terminalLearning(r.h, r.lp.current)
	}
	defer t.close()
	fmt.Fprintf(stdout, "thread %s\n", *thread)
	if *resume {
		if err := r.h.Resume(runCtx, *thread); err != nil {
			fmt.Fprintln(stderr, "tollgate:", err)
			t.shutdown(runCtx)
			return exitFailed
		}
	} else if _, _, err := r.h.Prompt(runCtx, *thread, task, nil); err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		t.shutdown(runCtx)
		return exitFailed
	}
	return t.drive(runCtx, ctx.Done(), r.events, r.sigs)
}

// running is what run wires from its checked flags (the first fields,
// set by runCmd) and then drives at the terminal (those after the blank
// line, set by wire).
type running struct {
	storeURL, policyFile, dir, thread string
	allowAll                          bool
	timeout, cmdTimeout               time.Duration
	provider                          agent.Provider
	model                             agent.Model
	sandbox                           *sandboxFlags
	mcpConfigs                        []mcpgate.ServerConfig

	lp     *loadedPolicy
	sigs   chan os.Signal
	h      *host.Host
	events <-chan agent.Event
}

// wire opens run's store (its own: one that tollgate serve replicas serve
// is refused), loads the policy, makes the agent with the bash tool
// (saying on stderr how it is confined) and the MCP servers' tools, and
// starts the host of the run's thread, subscribed to its events from the
// start. Signals are taken from then on (sigs). The run's parts live in
// runCtx; the MCP servers connect in ctx. What it made w closes.
func (r *running) wire(ctx, runCtx context.Context, w *wiring) error {
	// This host drives the store's runs alone, with no lease: on a store
	// replicas serve, it would drive theirs too.
	store, err := w.openStore(runCtx, r.storeURL, fmt.Sprintf("%s has been served by tollgate serve replicas (cluster mode): tollgate run drives a store alone, and would drive their runs; give it a store of its own (--store sqlite:FILE, or another database), and answer the replicas' questions with tollgate questions --server URL or --store %s", storeurl.Redacted(r.storeURL), storeurl.Redacted(r.storeURL)))
	if err != nil {
		return err
	}
	if r.lp, err = runPolicy(runCtx, store, r.policyFile, r.dir, r.allowAll, r.timeout, w.log); err != nil {
		return err
	}
	cfg, err := agentOf(store, r.provider, r.model, r.lp, r.sandbox, bash.Options{Dir: r.dir, Timeout: r.cmdTimeout, Masked: statePaths(r.storeURL, r.policyFile)}, nil)
	if err != nil {
		return err
	}
	fmt.Fprintln(w.stderr, "tollgate:", r.sandbox.startupLine())

	// Signals are taken before the run starts: a Ctrl-C at any point
	// aborts, never kills the process between two writes.
	r.sigs = make(chan os.Signal, 4)
	// SIGQUIT (Ctrl-\\) stops as SIGTERM does, rather than dumping
	// goroutines with the terminal left without echo; Ctrl-Z suspends
	// with the terminal restored.
	signal.Notify(r.sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, sigStop)
	w.later(func() { signal.Stop(r.sigs) })

	// The MCP servers' tools are known before the agent is made; the
	// servers are closed on return, once drive has stopped the host.
	servers, err := w.connectMCP(ctx, r.mcpConfigs, func(line string) { fmt.Fprintln(w.stderr, line) })
	if err != nil {
		return err
	}
	if servers != nil {
		fmt.Fprintln(w.stderr, "tollgate:", mcpSummary(servers))
	}
	if cfg, err = withMCP(cfg, servers); err != nil {
		return withCode(exitUsage, err)
	}
	// The same host as the service: a run that waits parks, and resumes
	// when its question is answered here, from another process, or by the
	// deadline.
	// It drives this thread only: the store's other unfinished runs are
	// their hosts' (a serve's, another run's), with their directories and
	// policies.
	r.h, r.events, err = w.startHost(runCtx, host.Config{Store: store, Agent: cfg, Threads: func(id string) bool { return id == r.thread }}, 4096)
	return err
}

// runFlagsProblem says what is wrong with run's --resume, --no-wait and
// --by as given, or "".
func runFlagsProblem(resume, noWait bool, thread, storeURL, by string) string {
	durable := storeURL != "memory"
	switch {
	case resume && thread == "":
		return "--resume needs --thread"
	case resume && !durable:
		return "--resume needs a durable --store (sqlite:PATH or postgres://...): a memory store forgets the run when the process ends"
	case noWait && !durable:
		return "--no-wait needs a durable --store (sqlite:PATH or postgres://...): with memory the waiting run would be lost on exit"
	}
	if reserved(by) {
		return fmt.Sprintf("--by %q is reserved; give the name of the person answering", by)
	}
	return ""
}

// runModel is the model --model names; one whose credentials are missing
// is an error that says which.
func runModel(spec string) (agent.Provider, agent.Model, error) {
	provider, model, err := providerFor(spec)
	if err != nil {
		return nil, model, err
	}
	if problem := credentialProblem(spec); problem != "" {
		return nil, model, errors.New(problem)
	}
	return provider, model, nil
}

// runPolicy is run's policy: the file's (the built-in one for builtin),
// reloaded when it changes, or without a file every call asked (run
// without --allow-all) with the deadline timeout. Without a file, only
// the approval is set.
func runPolicy(ctx context.Context, store checkpoint.Store, file, dir string, allowAll bool, timeout time.Duration, log *slog.Logger) (*loadedPolicy, error) {
	// Without --policy every call is asked, and said as a policy says it:
	// why, and what a bash command would do.
	askAll, err := policy.Parse("run's ask-every-call policy", []byte("version: 1\ndefault: ask\nshell: {bash: cmd}\nrules: []\n"), policyOptions())
	if err != nil {
		return nil, err
	}
	if file != "" {
		// A broken edit of the file keeps the policy in force and says why
		// (on log).
		return loadPolicy(ctx, file, log, policyWatch{}, learningOptions(store, dir, log))
	}
	asked := askAll.HITL()
	return &loadedPolicy{approval: func(ctx context.Context, c *hitl.PolicyContext) hitl.ApprovalDecision {
		if allowAll {
			return hitl.Approve()
		}
		return hitl.AskUser(hitl.AskOptions{Timeout: timeout, Details: asked(ctx, c).Details()})
	}}, nil
}

// reserved names are recorded by the runtime itself: an answer given as
// one would be indistinguishable from a deadline or an abort.
func reserved(by string) bool {
	switch by {
	case "", "timeout", "abort", "dev":
		return true
	}
	return false
}
