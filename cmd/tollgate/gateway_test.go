package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/mcptest"
)

const gatewayTestPolicy = `version: 1
default: ask
rules:
  - name: reads
    tool: mcp__s__echo
    action: allow
  - name: no-deletes
    tool: "mcp__*__delete_*"
    action: block
    reason: deleting is not for agents
  - name: notes
    tool: mcp__s__write_note
    action: ask
    impact: writes a file
`

// gatewayProc is a `tollgate mcp-gateway` child process on HTTP.
type gatewayProc struct {
	cmd      *exec.Cmd
	endpoint string // http://.../mcp
	page     string // http://.../
	token    string // the MCP endpoint's
	reviewer string // the page's and the API's
	logs     *lockedWriter
}

func startGateway(t *testing.T, dir string, extra ...string) *gatewayProc {
	t.Helper()
	bin := mcptest.BuildStdioServer(t)
	pol := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(pol, []byte(gatewayTestPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	// The server gets only the environment its config gives it.
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"s": map[string]any{
		"command": bin, "env": map[string]string{mcptest.EnvLedger: filepath.Join(dir, "ledger")}}}})
	if err := os.WriteFile(filepath.Join(dir, "mcp.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"mcp-gateway", "--addr", "127.0.0.1:0", "--store", "sqlite:" + filepath.Join(dir, "gw.db"),
		"--token-file", filepath.Join(dir, "token"), "--reviewer-token-file", filepath.Join(dir, "reviewer-token"), "--policy", pol, "--progress", "100ms", "--mcp-config", filepath.Join(dir, "mcp.json")}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "TOLLGATE_TEST_AS_CLI=1", "TOLLGATE_TOKENS=", "TOLLGATE_TOKENS_FILE=", "TOLLGATE_GATEWAY_TOKEN=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &gatewayProc{cmd: cmd, logs: &lockedWriter{}}
	cmd.Stderr = p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	found := make(chan []string, 1)
	go func() {
		re := regexp.MustCompile(`MCP endpoint (http://[0-9.:]+/)mcp`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case m := <-found:
		p.page, p.endpoint = m[1], m[1]+"mcp"
	case <-time.After(60 * time.Second):
		t.Fatalf("the gateway did not start; its log:\n%s", p.logs.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	p.token = strings.TrimSpace(string(b))
	if b, err = os.ReadFile(filepath.Join(dir, "reviewer-token")); err != nil {
		t.Fatal(err)
	}
	p.reviewer = strings.TrimSpace(string(b))
	return p
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// api calls the gateway's API as a reviewer (token "" : as nobody).
func (p *gatewayProc) api(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	return p.apiAs(t, p.reviewer, method, path, body)
}

func (p *gatewayProc) apiAs(t *testing.T, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	return apiCall(t, token, method, p.page+strings.TrimPrefix(path, "/"), body)
}

// pendingQuestion waits for the gateway's one pending question.
func (p *gatewayProc) pendingQuestion(t *testing.T) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_, out := p.api(t, "GET", "/v1/questions?status=pending", "")
		if qs, _ := out["questions"].([]any); len(qs) == 1 {
			return qs[0].(map[string]any)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no pending question; the gateway's log:\n%s", p.logs.String())
	return nil
}

func resultText(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// The gateway between an MCP client and a stdio server, as a user runs
// it: the token, the tool list, an allowed call, an asked call answered
// through the API while the client gets progress, and a restart while a
// call waits.
func TestGatewayCommand(t *testing.T) {
	dir := t.TempDir()
	p := startGateway(t, dir)

	// No token, no MCP.
	resp, err := http.Post(p.endpoint, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}

	var progress []string
	progressSeen := make(chan struct{}, 100)
	c := mcp.NewClient(&mcp.Implementation{Name: "ide", Version: "2.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress = append(progress, r.Params.Message)
			progressSeen <- struct{}{}
		}})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: p.endpoint,
		HTTPClient: &http.Client{Transport: bearer{p.token}}}, nil)
	if err != nil {
		t.Fatalf("connecting: %v\n%s", err, p.logs.String())
	}
	defer cs.Close()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range list.Tools {
		names[tool.Name] = true
	}
	if !names["echo"] || !names["write_note"] || names["delete_repo"] || names["bad_schema"] {
		t.Fatalf("tools/list: %v", names)
	}
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || r.IsError || resultText(r) != "echo: hi" {
		t.Fatalf("allowed: %v %v %q", err, r != nil && r.IsError, resultText(r))
	}

	// Asked: approved through the API while progress flows.
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"path": "/tmp/x", "text": "hello"}}
		params.SetProgressToken("p1")
		r, err := cs.CallTool(context.Background(), params)
		if err != nil {
			r = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- r
	}()
	q := p.pendingQuestion(t)
	details, _ := q["payload"].(map[string]any)["details"].(map[string]any)
	if !strings.HasPrefix(details["mcp_client"].(string), "ide 2.0") || details["mcp_server"] != "s" {
		t.Errorf("the question does not say which client and server: %v", details)
	}
	select {
	case <-progressSeen:
	case <-time.After(5 * time.Second):
		t.Fatal("no progress while the call waited")
	}
	// Neither the MCP client's token nor none answers a question: the
	// gated agent cannot approve its own calls.
	for _, token := range []string{"", p.token} {
		if code, _ := p.apiAs(t, token, "POST", "/v1/questions/"+q["thread_id"].(string)+"/"+q["id"].(string)+"/answer",
			`{"decision": "approve", "digest": "`+q["digest"].(string)+`"}`); code != http.StatusUnauthorized {
			t.Fatalf("an answer without the reviewers' token: %d", code)
		}
	}
	code, out := p.api(t, "POST", "/v1/questions/"+q["thread_id"].(string)+"/"+q["id"].(string)+"/answer",
		`{"decision": "approve", "digest": "`+q["digest"].(string)+`"}`)
	if code != 200 {
		t.Fatalf("answer: %d %v", code, out)
	}
	select {
	case r := <-done:
		if r.IsError || !strings.Contains(resultText(r), "wrote 5 bytes") {
			t.Fatalf("approved call: %q", resultText(r))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the approved call did not return")
	}
	if !strings.Contains(progress[0], "waiting for a person") {
		t.Errorf("progress says %q", progress[0])
	}

	// A call waits; the gateway is stopped: the client is told to retry,
	// and after a restart the question is closed, its answer refused.
	go func() {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"path": "/tmp/y", "text": "again"}})
		if err != nil {
			r = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "client error: " + err.Error()}}}
		}
		done <- r
	}()
	q = p.pendingQuestion(t)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case r := <-done:
		if !r.IsError || r.Meta["tollgate/retryable"] != true {
			t.Fatalf("a call waiting when the gateway stopped got %q (meta %v)", resultText(r), r.Meta)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call was not answered at shutdown")
	}
	p.cmd.Wait()
	// The audit log says who called what through which server, allowed
	// calls too.
	_, audit, _ := runCLI(t, "", "audit", "--store", "sqlite:"+filepath.Join(dir, "gw.db"))
	for _, want := range []string{"calls tool echo of server s", "calls tool write_note of server s", "MCP client ide 2.0"} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit log lacks %q:\n%s", want, audit)
		}
	}
	p2 := startGateway(t, dir)
	code, out = p2.api(t, "GET", "/v1/questions/"+q["thread_id"].(string)+"/"+q["id"].(string), "")
	if code != 200 || out["status"] != "aborted" {
		t.Fatalf("the question of a call whose gateway stopped: %d %v", code, out)
	}
	code, _ = p2.api(t, "POST", "/v1/questions/"+q["thread_id"].(string)+"/"+q["id"].(string)+"/answer",
		`{"decision": "approve", "digest": "`+q["digest"].(string)+`"}`)
	if code != http.StatusGone { // 410 aborted, as API.md says
		t.Fatalf("an answer to a call that no longer exists: %d", code)
	}
	calls := mcptest.ReadLedger(t, filepath.Join(dir, "ledger"))
	if len(calls) != 1 || calls[0].Args["path"] != "/tmp/x" {
		t.Fatalf("the server's ledger: %v", calls)
	}
}

// A client starts the gateway over stdio, as a desktop assistant's config
// says to; the reviewer page listens meanwhile.
func TestGatewayStdio(t *testing.T) {
	dir := t.TempDir()
	bin := mcptest.BuildStdioServer(t)
	pol := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(pol, []byte(gatewayTestPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "mcp-gateway", "--stdio", "--addr", "127.0.0.1:0", "--store", "sqlite:"+filepath.Join(dir, "gw.db"),
		"--reviewer-token-file", filepath.Join(dir, "reviewer-token"), "--policy", pol, "--mcp", "s="+bin)
	cmd.Env = append(os.Environ(), "TOLLGATE_TEST_AS_CLI=1", "TOLLGATE_TOKENS=", "TOLLGATE_TOKENS_FILE=")
	logs := &lockedWriter{}
	cmd.Stderr = logs
	c := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("starting the gateway on stdio: %v\n%s", err, logs.String())
	}
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "over stdio"}})
	if err != nil || r.IsError || resultText(r) != "echo: over stdio" {
		t.Fatalf("echo over stdio: %v %q\n%s", err, resultText(r), logs.String())
	}
	r, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_repo", Arguments: map[string]any{"repo": "x"}})
	if err != nil || !r.IsError || !strings.Contains(resultText(r), "deleting is not for agents") {
		t.Fatalf("a blocked call over stdio: %v %q", err, resultText(r))
	}
	if err := cs.Close(); err != nil {
		t.Logf("closing: %v", err)
	}
	if !strings.Contains(logs.String(), "reviewer page http://127.0.0.1:") {
		t.Errorf("the gateway on stdio does not say where its page is:\n%s", logs.String())
	}
}

// Without --policy the gateway starts, and asks about every call.
func TestGatewayDefaultPolicy(t *testing.T) {
	approval, hidden, name, err := gatewayPolicyOf(context.Background(), "", nil, policyWatch{})
	if err != nil {
		t.Fatal(err)
	}
	if hidden("mcp__s__delete_repo", nil) || !strings.Contains(name, "every call asks") {
		t.Errorf("the default policy hides a tool, or is named %q", name)
	}
	d := approval(context.Background(), &hitl.PolicyContext{Tool: "mcp__s__echo", RawArgs: json.RawMessage(`{}`)})
	if d.Action() != "ask" {
		t.Errorf("the default policy decides %s on an MCP call", d)
	}
}

// The MCP client's token cannot also be the reviewers'.
func TestGatewaySameTokenRefused(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("the-same-token-for-both-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "", "mcp-gateway", "--addr", "127.0.0.1:0", "--store", "memory", "--token-file", tok, "--reviewer-token-file", tok, "--mcp", "s=/bin/true")
	if code != 2 || !strings.Contains(errOut, "give them different tokens") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// The gateway's state inside a directory a stdio MCP server is given (a
// filesystem server's root) is refused, naming the risk (issue 21's
// attack D: an allowed read_file returned the reviewers' token), unless
// --allow-state-in-mcp-roots; so is a store URL with a password.
func TestGatewayStateInMCPRootRefused(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "work")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	args := func(reviewer string, extra ...string) []string {
		return append([]string{"mcp-gateway", "--addr", "127.0.0.1:0", "--store", "memory", "--token-file", filepath.Join(elsewhere, "token"),
			"--reviewer-token-file", reviewer, "--mcp", "fs=/bin/true -y server " + root}, extra...)
	}
	code, _, errOut := runCLI(t, "", args(filepath.Join(root, "reviewer-token"))...)
	if code != 2 || !strings.Contains(errOut, "reviewer-token is inside "+root+", a directory MCP server fs is given") || !strings.Contains(errOut, "--allow-state-in-mcp-roots") {
		t.Fatalf("state in a root: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(root, "reviewer-token")); err == nil {
		t.Error("the refused gateway made its token file in the root")
	}
	// Forced, it warns and gets as far as the server (which is not an
	// MCP server).
	code, _, errOut = runCLI(t, "", args(filepath.Join(root, "reviewer-token"), "--allow-state-in-mcp-roots")...)
	if code == 2 || strings.Contains(errOut, "keep it elsewhere") || !strings.Contains(errOut, "level=WARN msg=\"tollgate's state is inside a directory an MCP server is given") {
		t.Fatalf("forced: exit %d: %s", code, errOut)
	}
	code, _, errOut = runCLI(t, "", "mcp-gateway", "--addr", "127.0.0.1:0", "--store", "postgres://u:secret@db/x", "--mcp", "s=/bin/true")
	if code != 2 || !strings.Contains(errOut, "--store carries a password") {
		t.Fatalf("password: exit %d: %s", code, errOut)
	}
}
