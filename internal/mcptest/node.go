package mcptest

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvTSSDK names the directory that holds node_modules/@modelcontextprotocol/sdk,
// the MCP TypeScript SDK that [StartNodeClient] runs on:
//
//	npm install --prefix "$DIR" --no-audit --no-fund @modelcontextprotocol/sdk@1.32.2
const EnvTSSDK = "TOLLGATE_TEST_MCP_TS_SDK"

//go:embed nodeclient/client.cjs
var nodeClientScript []byte

// NodeClient is an MCP client on the official TypeScript SDK, run by node
// in a process of its own and connected over streamable HTTP: a client
// that is not the Go SDK, which a test can kill as a user's would die.
type NodeClient struct {
	// Session is the MCP session the gateway gave it.
	Session string
	// SDK is the version of the TypeScript SDK it runs on.
	SDK string

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan NodeEvent
	stderr Buffer
	mu     sync.Mutex
	seen   []NodeEvent
	exited chan struct{}
}

// NodeEvent is one line the node client printed.
type NodeEvent struct {
	// Event is connected, sent (a call went out), result, error (a call
	// failed: Code and Message are the SDK's), progress, deleted (the
	// session was ended with an HTTP DELETE), client_error, fatal.
	Event   string          `json:"event"`
	ID      string          `json:"id,omitempty"`
	Session string          `json:"session,omitempty"`
	Code    int             `json:"code,omitempty"`
	Message string          `json:"message,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	// Progress is a progress notification as the SDK handed it to the
	// call's onprogress.
	Progress *struct {
		Progress float64 `json:"progress"`
		Total    float64 `json:"total,omitempty"`
		Message  string  `json:"message,omitempty"`
	} `json:"progress,omitempty"`
}

// NodeCall is a tools/call the node client makes.
type NodeCall struct {
	ID   string         `json:"id"` // names its events
	Name string         `json:"name"`
	Args map[string]any `json:"args,omitempty"`
	// Timeout is the SDK's request timeout for the call, in milliseconds.
	// Zero: the SDK's default (60 s).
	Timeout int `json:"timeout,omitempty"`
	// Progress asks for progress notifications (the SDK sends a progress
	// token), reported as progress events.
	Progress bool `json:"progress,omitempty"`
}

// NodeSDKDir is the directory [EnvTSSDK] names, checked to hold the SDK,
// with the SDK's version. Without node or the SDK the test is skipped, or
// fails when CI is "true": CI must run it.
func NodeSDKDir(t testing.TB) (dir, version string) {
	t.Helper()
	missing := func(why string) {
		t.Helper()
		msg := "mcptest: the TypeScript SDK client cannot run: " + why + " (install it: npm install --prefix DIR @modelcontextprotocol/sdk@1.32.2, and set " + EnvTSSDK + "=DIR)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node is not on PATH")
	}
	dir = os.Getenv(EnvTSSDK)
	if dir == "" {
		missing(EnvTSSDK + " is not set")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	if err != nil {
		missing(err.Error())
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil || pkg.Version == "" {
		missing("its package.json has no version")
	}
	return dir, pkg.Version
}

// StartNodeClient starts a node client of the MCP endpoint at url (with
// the bearer token) and waits until it is connected; it is killed when
// the test ends.
func StartNodeClient(t testing.TB, url, token string) *NodeClient {
	t.Helper()
	dir, version := NodeSDKDir(t)
	script := filepath.Join(t.TempDir(), "client.cjs")
	if err := os.WriteFile(script, nodeClientScript, 0o600); err != nil {
		t.Fatal(err)
	}
	c := &NodeClient{SDK: version, events: make(chan NodeEvent, 1024), exited: make(chan struct{})}
	c.cmd = exec.Command("node", script, url, token)
	c.cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	c.cmd.Stderr = &c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("mcptest: starting node: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev NodeEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				ev = NodeEvent{Event: "bad_line", Message: sc.Text()}
			}
			c.events <- ev
		}
		close(c.events)
	}()
	go func() {
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() { c.Kill(t) })
	ev := c.Next(t, "connected", "", 30*time.Second)
	c.Session = ev.Session
	return c
}

// Call starts a call; its outcome comes as a result or error event.
func (c *NodeClient) Call(t testing.TB, call NodeCall) {
	t.Helper()
	c.send(t, map[string]any{"op": "call", "id": call.ID, "name": call.Name, "args": call.Args, "timeout": call.Timeout, "progress": call.Progress})
	c.Next(t, "sent", call.ID, 10*time.Second)
}

// Delete ends the session with an HTTP DELETE, as the SDK's
// terminateSession does, and waits until the server answered it.
func (c *NodeClient) Delete(t testing.TB) {
	t.Helper()
	c.send(t, map[string]any{"op": "delete"})
}

func (c *NodeClient) send(t testing.TB, cmd map[string]any) {
	t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		t.Fatalf("mcptest: writing to the node client: %v; its stderr: %s", err, c.stderr.String())
	}
}

// Next waits for the next event named event (of the call id, if not
// empty), failing the test if none comes within the bound; the events
// passed on the way are kept ([NodeClient.Seen]).
func (c *NodeClient) Next(t testing.TB, event, id string, within time.Duration) NodeEvent {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				t.Fatalf("mcptest: the node client ended before a %s event; its stderr: %s; its events: %v", event, c.stderr.String(), c.Seen())
			}
			c.mu.Lock()
			c.seen = append(c.seen, ev)
			c.mu.Unlock()
			if ev.Event == "fatal" {
				t.Fatalf("mcptest: the node client failed: %s", ev.Message)
			}
			if ev.Event == event && (id == "" || ev.ID == id) {
				return ev
			}
		case <-timer.C:
			t.Fatalf("mcptest: no %s event from the node client within %s; its stderr: %s; its events: %v", event, within, c.stderr.String(), c.Seen())
			return NodeEvent{}
		}
	}
}

// Seen are the events read so far.
func (c *NodeClient) Seen() []NodeEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]NodeEvent(nil), c.seen...)
}

// Kill kills the node process (SIGKILL: it says nothing to the server)
// and waits until it is gone.
func (c *NodeClient) Kill(t testing.TB) {
	t.Helper()
	if c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Kill()
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		t.Errorf("mcptest: the node client did not exit after SIGKILL")
	}
}

// String is the events, for failure messages.
func (e NodeEvent) String() string {
	var b strings.Builder
	b.WriteString(e.Event)
	if e.ID != "" {
		b.WriteString(" " + e.ID)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if len(e.Result) > 0 {
		b.WriteString(" " + string(e.Result))
	}
	return b.String()
}
