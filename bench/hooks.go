//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
	"github.com/tollgate-ai/tollgate/internal/exectest"
	"github.com/tollgate-ai/tollgate/server"
)

const hooksUsage = `usage: go run ./bench hooks [-n N] [-rounds R] [-tollgate PATH]

The latency a coding agent's hook adds to a call tollgate's policy
allows: Bash "ls" of Claude Code, decided by a real tollgate serve (its
built-in coding-agent policy, SQLite store on this disk, a client token),
each figure beside the raw limit of the same kind of hook measured in the
same run:

  command hook   tollgate-hook claude-code (and tollgate hook claude-code),
                 a process a call, as Claude Code runs it (payload on
                 stdin, answer on stdout), beside a shell hook that reads
                 its input and prints allow
  HTTP endpoint  POST /v1/hooks/claude-code, as Claude Code's http hook
                 does (one kept-alive connection), beside an HTTP server
                 in this process that answers allow at once

Beside them, one commit of a SQLite store on the same disk: the HTTP
endpoint's decision of an allowed call is one commit (the call's whole
run and its audit entries) before the hook is answered, so one commit is
its limit on this disk.

The kinds take turns, N calls each a round, -pause apart (an agent's
model works between two calls, and the run of the last one has ended);
every call is a new tool_use_id of one session per kind (so its thread
grows as a real session's). The command hook is measured twice: the small
tollgate-hook binary (what tollgate hook install writes when it is
installed) and the whole tollgate binary (tollgate hook claude-code).
`

func hooksCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench hooks", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, hooksUsage); fs.PrintDefaults() }
	n := fs.Int("n", 200, "calls of each kind a round")
	rounds := fs.Int("rounds", 3, "rounds")
	bin := fs.String("tollgate", "", "the tollgate binary (default: built from ./cmd/tollgate)")
	small := fs.String("tollgate-hook", "", "the tollgate-hook binary (default: built from ./cmd/tollgate-hook)")
	pause := fs.Duration("pause", 20*time.Millisecond, "the pause between calls (an agent's model works between its calls)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "tollgate-bench-hooks-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := buildHookBinaries(ctx, dir, stderr, bin, small); err != nil {
		return err
	}
	const secret = "bench-hook-secret-0123456789"
	tokenFile := filepath.Join(dir, "hook.token")
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokenFile, []byte(secret), 0o600); err != nil {
		return err
	}
	entry := fmt.Sprintf("tokens:\n  - {name: bench, role: client, token_sha256: %s}\n", server.HashToken(secret))
	if err := os.WriteFile(tokens, []byte(entry), 0o600); err != nil {
		return err
	}
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)
	serve := exec.CommandContext(ctx, *bin, "serve", "--addr", "127.0.0.1:0", "--tokens", tokens,
		"--store", "sqlite:"+filepath.Join(dir, "t.db"), "--dir", work)
	serve.Env = append(os.Environ(), "TOLLGATE_TOKENS=", "TOLLGATE_TOKENS_FILE=", "TOLLGATE_HOOK_POLICY=")
	out, err := serve.StdoutPipe()
	if err != nil {
		return err
	}
	var logs bytes.Buffer
	serve.Stderr = &logs
	if err := serve.Start(); err != nil {
		return err
	}
	defer func() {
		_ = serve.Process.Signal(os.Interrupt)
		_ = serve.Wait()
	}()
	base, err := serverURL(out)
	if err != nil {
		return fmt.Errorf("%w; serve's log:\n%s", err, logs.String())
	}
	raw := rawHTTPHook()
	defer raw.Close()
	rawScript := filepath.Join(dir, "allow.sh")
	exectest.WriteProgram(rawScript, []byte("#!/bin/sh\ncat >/dev/null\nprintf '%s' '"+allowJSON+"'\n"))

	// The raw limit of a durable decision: one commit of the same kind of
	// store on the same disk, taking turns with the hooks.
	rawStore, err := sqlite.Open(ctx, filepath.Join(dir, "raw.db"), nil)
	if err != nil {
		return err
	}
	defer rawStore.Close()
	kinds := []hookKind{
		{name: "SQLite, one commit (raw limit of a decision)", call: func(i int) (string, error) {
			_, err := rawStore.AppendEvent(ctx, &checkpoint.Event{ThreadID: "bench", Type: "bench", Data: []byte(`{}`)})
			return `"permissionDecision":"allow"`, err
		}},
		{name: "command hook, raw (sh: read, print allow)", call: func(i int) (string, error) { return runHook(ctx, []string{rawScript}, payload("raw-cmd", i)) }},
		{name: "command hook, tollgate-hook claude-code", call: func(i int) (string, error) {
			return runHook(ctx, []string{*small, "claude-code", "--server", base, "--token-file", tokenFile, "--timeout", "60s"}, payload("small", i))
		}},
		{name: "command hook, tollgate hook claude-code", call: func(i int) (string, error) {
			return runHook(ctx, []string{*bin, "hook", "claude-code", "--server", base, "--token-file", tokenFile, "--timeout", "60s"}, payload("cmd", i))
		}},
		{name: "HTTP, raw (a server that answers allow)", call: func(i int) (string, error) { return postHook(ctx, raw.URL, "", payload("raw-http", i)) }},
		{name: "HTTP, POST /v1/hooks/claude-code", call: func(i int) (string, error) {
			return postHook(ctx, base+"/v1/hooks/claude-code", secret, payload("http", i))
		}},
	}
	samples, err := sampleHooks(kinds, *n, *rounds, *pause, stderr)
	if err != nil {
		return err
	}
	printHooks(stdout, kinds, samples, *n, *rounds)
	return nil
}

type hookKind struct {
	name string
	call func(i int) (string, error)
}

// buildHookBinaries builds tollgate and tollgate-hook into dir, each
// unless its path is given.
func buildHookBinaries(ctx context.Context, dir string, stderr io.Writer, bin, small *string) error {
	for _, b := range []struct {
		path *string
		pkg  string
	}{{bin, "tollgate"}, {small, "tollgate-hook"}} {
		if *b.path != "" {
			continue
		}
		*b.path = filepath.Join(dir, b.pkg)
		fmt.Fprintf(stderr, "building %s...\n", b.pkg)
		build := exec.CommandContext(ctx, "go", "build", "-o", *b.path, "./cmd/"+b.pkg)
		build.Stderr = stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building %s: %w", b.pkg, err)
		}
	}
	return nil
}

// sampleHooks calls every kind n times a round, the kinds in turn, with
// pause between calls, and returns each kind's latencies.
func sampleHooks(kinds []hookKind, n, rounds int, pause time.Duration, stderr io.Writer) ([][]time.Duration, error) {
	samples := make([][]time.Duration, len(kinds))
	call := 0
	for r := 0; r < rounds; r++ {
		for k := range kinds {
			for i := 0; i < n; i++ {
				start := time.Now()
				ans, err := kinds[k].call(call)
				d := time.Since(start)
				call++
				if err != nil {
					return nil, fmt.Errorf("%s: %w", kinds[k].name, err)
				}
				if !strings.Contains(ans, `"permissionDecision":"allow"`) {
					return nil, fmt.Errorf("%s: not allowed: %s", kinds[k].name, ans)
				}
				samples[k] = append(samples[k], d)
				time.Sleep(pause)
			}
			fmt.Fprintf(stderr, "round %d/%d, %s: p50 %s p99 %s\n", r+1, rounds, kinds[k].name, ms(pct(samples[k], 50)), ms(pct(samples[k], 99)))
		}
	}
	return samples, nil
}

func printHooks(stdout io.Writer, kinds []hookKind, samples [][]time.Duration, n, rounds int) {
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(stdout, "tollgate bench hooks — %d calls of each kind in %d rounds; load average %s\n", n*rounds, rounds, strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Fprintf(stdout, "%-45s %10s %10s %10s\n", "", "p50", "p90", "p99")
	for k, kd := range kinds {
		s := statsOf(samples[k])
		fmt.Fprintf(stdout, "%-45s %10s %10s %10s\n", kd.name, ms(s.P50), ms(s.P90), ms(s.P99))
	}
	for _, pair := range [][2]int{{1, 2}, {1, 3}, {4, 5}} {
		raw, tg := statsOf(samples[pair[0]]), statsOf(samples[pair[1]])
		fmt.Fprintf(stdout, "added: %-38s %10s %10s %10s\n", kinds[pair[1]].name, ms(tg.P50-raw.P50), ms(tg.P90-raw.P90), ms(tg.P99-raw.P99))
	}
}

const allowJSON = `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}`

// payload is Claude Code's PreToolUse input for Bash "ls", call i of the
// session.
func payload(session string, i int) []byte {
	return fmt.Appendf(nil, `{"session_id":"bench-%s","transcript_path":"/home/me/.claude/projects/p/bench.jsonl","cwd":"/home/me/p","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls","description":"List files"},"tool_use_id":"toolu_bench_%d"}`, session, i)
}

func runHook(ctx context.Context, argv []string, input []byte) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(input)
	cmd.Env = append(os.Environ(), "TOLLGATE_TOKEN=")
	out, err := cmd.Output()
	return string(out), err
}

var hookClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

func postHook(ctx context.Context, url, token string, input []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(input))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hookClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// rawHTTPHook is an HTTP hook that answers allow at once: the limit of an
// HTTP round trip on this machine.
func rawHTTPHook() *rawServer {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(allowJSON))
	})}
	go srv.Serve(ln)
	return &rawServer{srv: srv, URL: "http://" + ln.Addr().String() + "/hook"}
}

type rawServer struct {
	srv *http.Server
	URL string
}

func (r *rawServer) Close() { _ = r.srv.Close() }

// serverURL reads tollgate serve's start-up line for its URL.
func serverURL(stdout io.Reader) (string, error) {
	re := regexp.MustCompile(`open (http://[0-9.:]+)/`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case u := <-found:
		return u, nil
	case <-time.After(60 * time.Second):
		return "", errors.New("tollgate serve did not start")
	}
}
