package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/storeurl"
	"github.com/tollgate-ai/tollgate/policy"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

func init() {
	register("run", "run a task; tool calls are approved in the terminal", runCmd)
}

const runHelp = `usage: tollgate run [flags] "task"

Runs the task with the bash tool. Every tool call is shown to you for
approval unless --allow-all is given. Without a model configured, the
offline demo model runs each line of the task that starts with "$ " as a
bash command, so this works with no network:

  tollgate run $'list files\n$ ls\n$ rm -r /tmp/scratch'

Answers at the prompt: a (approve), d (deny; you are asked for a reason),
e (edit the arguments: $EDITOR if set, else one line of JSON).

flags:
`

func runCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, runHelp); fs.PrintDefaults() }
	dir := fs.String("dir", ".", "working directory of the bash tool")
	timeout := fs.Duration("approval-timeout", 5*time.Minute, "time to answer each approval (0: no deadline)")
	cmdTimeout := fs.Duration("cmd-timeout", time.Minute, "time limit of one bash command")
	allowAll := fs.Bool("allow-all", false, "run every tool call without asking (dangerous)")
	policyFile := fs.String("policy", "", "a policy file (see policy/README.md); without one every call is asked. The file is reloaded when it changes")
	thread := fs.String("thread", "", "thread id (default: a new one)")
	modelSpec := fs.String("model", "demo", "demo (offline), anthropic:MODEL or openai:MODEL (OPENAI_BASE_URL for Ollama, vLLM...)")
	storeURL := fs.String("store", "memory", "where threads and questions live: memory, sqlite:PATH or postgres://...")
	resume := fs.Bool("resume", false, "continue the thread's unfinished run instead of starting one (needs --thread and a durable --store)")
	var sandbox sandboxFlags
	sandbox.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 && !*resume {
		fs.Usage()
		return 2
	}
	if *resume && *thread == "" {
		fmt.Fprintln(stderr, "tollgate: --resume needs --thread")
		return 2
	}
	task := strings.Join(fs.Args(), " ")
	if *thread == "" {
		*thread = time.Now().UTC().Format("run-20060102-150405.000")
	}

	provider, model, err := providerFor(*modelSpec)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 2
	}
	store, err := storeurl.Open(ctx, *storeURL)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	defer store.Close()
	var approval hitl.Policy = func(ctx context.Context, c *hitl.PolicyContext) hitl.ApprovalDecision {
		if *allowAll {
			return hitl.Approve()
		}
		return hitl.AskUser(hitl.AskOptions{Timeout: *timeout, Details: map[string]any{"matched_rule": "default: ask", "impact": "runs on this machine"}})
	}
	var decide func(context.Context, json.RawMessage) (string, error)
	if *policyFile != "" {
		rp, err := policy.NewReloadable(*policyFile, policyOptions())
		if err != nil {
			fmt.Fprintln(stderr, "tollgate:", err)
			return 1
		}
		// A broken edit keeps the policy in force and says why.
		go rp.Watch(ctx, time.Second, func(changed bool, err error) {
			if err != nil {
				fmt.Fprintf(stderr, "tollgate: policy %s not reloaded, keeping the previous one: %v\n", *policyFile, err)
			} else if changed {
				fmt.Fprintf(stderr, "tollgate: policy %s reloaded\n", *policyFile)
			}
		})
		approval, decide = rp.HITL(), rp.SandboxFor("bash")
	}
	bashOpts, err := sandbox.options(*dir, bash.Options{Timeout: *cmdTimeout}, decide)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 2
	}
	fmt.Fprintln(stderr, "tollgate:", sandbox.startupLine())
	// The same host as the service: a run that waits parks, and resumes
	// when its question is answered here, from another process, or by the
	// deadline.
	h, err := host.New(host.Config{Store: store, Agent: bashAgent(store, provider, model, bashOpts, approval, nil)})
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	events, unsubscribe := h.Subscribe(4096)
	defer unsubscribe()
	if err := h.Start(ctx); err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		h.Shutdown(sctx)
	}()
	fmt.Fprintf(stdout, "thread %s\n", *thread)
	term := &terminal{in: bufio.NewReader(stdin), out: stdout, channel: hitl.NewCheckpointedChannel(store, *thread, nil), host: h}
	if *resume {
		if err := h.Resume(ctx, *thread); err != nil {
			fmt.Fprintln(stderr, "tollgate:", err)
			return 1
		}
	} else if _, _, err := h.Prompt(ctx, *thread, task, nil); err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	return term.drive(ctx, *thread, events, stderr)
}

// terminal prints a run's progress and asks its questions at the prompt.
type terminal struct {
	in      *bufio.Reader
	out     io.Writer
	channel *hitl.CheckpointedChannel
	host    *host.Host
}

// drive shows the thread's events and asks its questions until its run
// ends.
func (t *terminal) drive(ctx context.Context, threadID string, events <-chan agent.Event, stderr io.Writer) int {
	// Questions are answered one at a time, in the order they are asked.
	hostCtx, stopHost := context.WithCancel(ctx)
	defer stopHost()
	requests := make(chan *hitl.Request)
	go func() {
		defer close(requests)
		for req, err := range t.channel.Subscribe(hostCtx) {
			if err != nil {
				fmt.Fprintln(stderr, "tollgate: reading questions:", err)
				continue
			}
			select {
			case requests <- req:
			case <-hostCtx.Done():
				return
			}
		}
	}()
	// A safety check in case an event was dropped: the thread's status in
	// the store is the truth.
	check := time.NewTicker(time.Second)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(stderr, "tollgate: stopped; the run can be resumed with --resume")
			return 1
		case e, ok := <-events:
			if !ok {
				return 1
			}
			if e.Meta().ThreadID != threadID {
				continue
			}
			t.show(e)
			switch e := e.(type) {
			case *agent.RunFinishedEvent:
				if e.Err != nil {
					fmt.Fprintln(stderr, "tollgate:", e.Err)
					return 1
				}
				return 0
			case *agent.AgentAbortedEvent:
				return 1
			}
		case req, ok := <-requests:
			if ok {
				t.answer(hostCtx, req)
			}
		case <-check.C:
			th, err := t.host.Store().LoadThread(ctx, threadID)
			if err == nil && th.Status == checkpoint.ThreadIdle {
				return 0
			}
			if err == nil {
				if st, runErr := t.host.State(th); st == host.RunFailed {
					fmt.Fprintln(stderr, "tollgate:", runErr)
					return 1
				}
			}
		}
	}
}

func (t *terminal) show(e agent.Event) {
	switch e := e.(type) {
	case *agent.MessageEvent:
		if e.Message.Text != "" {
			fmt.Fprintf(t.out, "assistant: %s\n", e.Message.Text)
		}
	case *agent.ToolCallStartedEvent:
		fmt.Fprintf(t.out, "→ %s %s\n", e.Call.Name, e.Args)
	case *agent.ToolCallFinishedEvent:
		status := "ok"
		if e.Result.IsError {
			status = "error"
		}
		fmt.Fprintf(t.out, "← %s [%s] %s\n", e.Call.ID, status, clip(e.Result.Content, 400))
	case *agent.HitlResolvedEvent:
		if e.Question.Status != "answered" {
			fmt.Fprintf(t.out, "question %s %s\n", e.Question.ID, e.Question.Status)
		}
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (t *terminal) prompt(label string) (string, error) {
	fmt.Fprint(t.out, label)
	line, err := t.in.ReadString('\n')
	if err != nil && (line == "" || !errors.Is(err, io.EOF)) {
		return "", err
	}
	return strings.TrimSpace(line), nil
}

// answer asks the person at the terminal until the channel accepts an
// answer or the question is no longer open.
func (t *terminal) answer(ctx context.Context, req *hitl.Request) {
	p := req.Payload
	switch p.Kind {
	case hitl.KindApprove:
		fmt.Fprintf(t.out, "\n── approval needed: %s ──\n", p.ToolName)
		keys := make([]string, 0, len(p.Args))
		for k := range p.Args {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, _ := json.Marshal(p.Args[k])
			fmt.Fprintf(t.out, "   %s: %s\n", k, v)
		}
		if len(p.Details) > 0 {
			fmt.Fprintf(t.out, "   rule: %v   impact: %v\n", p.Details["matched_rule"], p.Details["impact"])
		}
		if req.TimeoutSeconds > 0 {
			fmt.Fprintf(t.out, "   answer within %s\n", req.Remaining(time.Now()).Round(time.Second))
		}
	case hitl.KindAsk:
		fmt.Fprintf(t.out, "\n── question ──\n   %s\n", p.Question)
		if len(p.Choices) > 0 {
			fmt.Fprintf(t.out, "   choices: %s\n", strings.Join(p.Choices, ", "))
		}
	case hitl.KindConfirm:
		fmt.Fprintf(t.out, "\n── confirm ──\n   %s\n", p.Message)
	default:
		fmt.Fprintf(t.out, "\n── %s ──\n   %s\n", p.Kind, p.Raw)
	}
	for {
		ans, err := t.read(req)
		if err != nil {
			fmt.Fprintf(t.out, "no answer (%v); the question stays open until its deadline\n", err)
			return
		}
		raw, err := json.Marshal(ans)
		if err == nil {
			_, err = t.host.Answer(ctx, req.ThreadID, req.QuestionID, raw, "terminal")
		}
		if err == nil {
			return
		}
		fmt.Fprintf(t.out, "refused: %v\n", err)
		if errors.Is(err, hitl.ErrAlreadyAnswered) || errors.Is(err, hitl.ErrExpired) || errors.Is(err, hitl.ErrAborted) || errors.Is(err, hitl.ErrUnknownQuestion) {
			return
		}
	}
}

func (t *terminal) read(req *hitl.Request) (any, error) {
	switch req.Payload.Kind {
	case hitl.KindApprove:
		for {
			choice, err := t.prompt("[a]pprove, [d]eny, [e]dit? ")
			if err != nil {
				return nil, err
			}
			switch strings.ToLower(choice) {
			case "a", "approve", "y", "yes":
				return hitl.ApproveAnswer{Decision: hitl.DecisionApprove, Digest: req.Digest}, nil
			case "d", "deny", "n", "no":
				reason, err := t.prompt("reason: ")
				if err != nil {
					return nil, err
				}
				return hitl.ApproveAnswer{Decision: hitl.DecisionDeny, Reason: reason, Digest: req.Digest}, nil
			case "e", "edit":
				edited, err := t.edit(req.Payload.Args)
				if err != nil {
					fmt.Fprintf(t.out, "edit failed: %v\n", err)
					continue
				}
				return hitl.ApproveAnswer{Decision: hitl.DecisionEdit, EditedArgs: edited, Digest: req.Digest}, nil
			}
		}
	case hitl.KindConfirm:
		for {
			yn, err := t.prompt("[y]es or [n]o? ")
			if err != nil {
				return nil, err
			}
			switch strings.ToLower(yn) {
			case "y", "yes":
				return true, nil
			case "n", "no":
				return false, nil
			}
		}
	case hitl.KindAsk:
		return t.prompt("answer: ")
	}
	line, err := t.prompt("answer (JSON): ")
	if err != nil {
		return nil, err
	}
	return json.RawMessage(line), nil
}

// edit lets the person change the arguments: in $EDITOR when set, else as
// one line of JSON.
func (t *terminal) edit(args map[string]any) (map[string]any, error) {
	current, _ := json.MarshalIndent(args, "", "  ")
	var edited []byte
	if editor := os.Getenv("EDITOR"); editor != "" {
		f, err := os.CreateTemp("", "tollgate-args-*.json")
		if err != nil {
			return nil, err
		}
		defer os.Remove(f.Name())
		if _, err := f.Write(current); err != nil {
			return nil, err
		}
		f.Close()
		cmd := exec.Command("sh", "-c", editor+` "$1"`, "editor", f.Name())
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s: %w", editor, err)
		}
		if edited, err = os.ReadFile(f.Name()); err != nil {
			return nil, err
		}
	} else {
		fmt.Fprintf(t.out, "current: %s\n", mustCompact(args))
		line, err := t.prompt("new arguments (JSON): ")
		if err != nil {
			return nil, err
		}
		edited = []byte(line)
	}
	var m map[string]any
	if err := json.Unmarshal(edited, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	return m, nil
}

func mustCompact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
