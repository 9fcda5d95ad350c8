package web_test

// Browser tests of the reviewer page: a real server (server.New over a
// host on a memory store, the demo model and the hitl approval
// middleware) and Debian's chromium driven with chromedp. Without
// chromium they are skipped, except under CI=true, where they fail.
//
// Screenshots go to $TOLLGATE_SCREENSHOTS (default: a temporary folder,
// printed with t.Log).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/display"
	"github.com/tollgate-ai/tollgate/provider/scripted"
	"github.com/tollgate-ai/tollgate/server"
	"github.com/tollgate-ai/tollgate/server/web"
)

const (
	reviewerSecret = "reviewer-secret-0123456789"
	otherSecret    = "other-secret-0123456789"
	clientSecret   = "client-secret-0123456789"
	adminSecret    = "admin-secret-0123456789"
)

type bashArgs struct {
	Cmd string `json:"cmd"`
	Cwd string `json:"cwd,omitempty"`
}

// policy: "ls" runs, "dd" is refused by the rule "no-dd", a command with
// "quick" is asked with an 8 s deadline, everything else with 5 minutes:
// 8 s gives a loaded machine time to show the red countdown before the
// deadline passes (3 s did not, once in a full test run).
var bashPolicy = hitl.Typed(func(ctx context.Context, c *hitl.PolicyContext, a bashArgs) hitl.ApprovalDecision {
	switch {
	case strings.HasPrefix(a.Cmd, "ls"):
		return hitl.Approve()
	case strings.HasPrefix(a.Cmd, "dd"):
		return hitl.DenyWith("destructive I/O", map[string]any{"matched_rule": "no-dd"})
	case strings.Contains(a.Cmd, "quick"):
		return hitl.AskUser(hitl.AskOptions{Timeout: 8 * time.Second, Details: map[string]any{"matched_rule": "quick", "impact": "a short deadline"}})
	}
	return hitl.AskUser(hitl.AskOptions{Timeout: 5 * time.Minute,
		Details: map[string]any{"matched_rule": "ask-by-default", "impact": "runs a shell command"}})
})

// model is the demo model, plus a line "ask: QUESTION|CHOICE,CHOICE"
// that becomes an ask_user call; a message "model fails" fails the run,
// as a model whose key is not set does.
type model struct{ scripted.Demo }

func (m model) Complete(ctx context.Context, req *agent.Request, onText func(string)) (*agent.Message, error) {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Text == "model fails" {
		return nil, errors.New("the model's key is not set")
	}
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == agent.RoleUser {
		for _, line := range strings.Split(req.Messages[n-1].Text, "\n") {
			if c, ok := strings.CutPrefix(line, "call: "); ok {
				// call: NAME {JSON}: a call of another tool (envOptions.tools).
				name, args, _ := strings.Cut(c, " ")
				call := agent.ToolCall{ID: fmt.Sprintf("call_%d", n), Name: name, Arguments: json.RawMessage(args)}
				return &agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}, StopReason: agent.StopToolUse}, nil
			}
			if q, ok := strings.CutPrefix(line, "ask: "); ok {
				question, choices, _ := strings.Cut(q, "|")
				args := map[string]any{"question": question}
				if choices != "" {
					args["choices"] = strings.Split(choices, ",")
				}
				call := scripted.Call(fmt.Sprintf("ask_%d", n), "ask_user", args)
				return &agent.Message{Role: agent.RoleAssistant, Text: "I need to ask.", ToolCalls: []agent.ToolCall{call}, StopReason: agent.StopToolUse}, nil
			}
		}
	}
	return m.Demo.Complete(ctx, req, onText)
}

// shellResult is shaped like the bash tool's result (tools/bash.Result).
type shellResult struct {
	ExitCode  int    `json:"exit_code"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	TimedOut  bool   `json:"timed_out,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// paddedOutput is what "print padding" prints: blank lines and blanks
// that would push the end out of view.
var paddedOutput = "ls\n" + strings.Repeat("\n", 200) + "rm -rf ~" + strings.Repeat("\t", 40) + "!\n"

// shellOut pretends to run "printf TEXT": TEXT is stdout; with " 2> ERR"
// ERR is stderr too, and the exit code 1.
func shellOut(text string) shellResult {
	out, errText, failed := strings.Cut(text, " 2> ")
	r := shellResult{Stdout: out + "\n"}
	if failed {
		r.ExitCode, r.Stderr = 1, errText+"\n"
	}
	return r
}

type env struct {
	t      *testing.T
	ts     *httptest.Server
	outage *outage
	host   *host.Host
	store  checkpoint.Store
	// running has a value each time "sleep until aborted" starts; that
	// command runs until its run is stopped.
	running chan struct{}
}

// envOptions change what newEnvWith builds; the zero value is newEnv's.
type envOptions struct {
	dev bool
	// policy decides the bash calls; nil: bashPolicy.
	policy hitl.Policy
	// model names the model in the page's header.
	model string
	// annotations are the bash tool's (where it says its calls run).
	annotations map[string]any
	// configure, if set, changes the server's configuration last.
	configure func(*server.Config)
	// tools are more tools, each of whose calls is asked ("call: NAME
	// {JSON}" makes one).
	tools []*agent.Tool
}

func newEnv(t *testing.T, dev bool) *env {
	t.Helper()
	return newEnvWith(t, envOptions{dev: dev})
}

func newEnvWith(t *testing.T, o envOptions) *env {
	t.Helper()
	dev := o.dev
	if o.policy == nil {
		o.policy = bashPolicy
	}
	if o.model == "" {
		o.model = "demo (offline demo model)"
	}
	store := memory.New()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	running := make(chan struct{}, 8)
	bash := agent.NewTool("bash", "Run a shell command (pretend).", func(ctx context.Context, a bashArgs) (any, error) {
		if text, ok := strings.CutPrefix(a.Cmd, "printf "); ok {
			return shellOut(text), nil
		}
		if a.Cmd == "print padding" {
			return shellResult{Stdout: paddedOutput}, nil
		}
		if a.Cmd == "sleep until aborted" {
			running <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return "ran: " + a.Cmd, nil
	}, &agent.ToolOptions{Annotations: o.annotations})
	byTool := map[string]hitl.Policy{"bash": o.policy}
	for _, t := range o.tools {
		byTool[t.Name()] = func(context.Context, *hitl.PolicyContext) hitl.ApprovalDecision {
			return hitl.AskUser(hitl.AskOptions{})
		}
	}
	policy := hitl.ByTool(byTool, func(context.Context, *hitl.PolicyContext) hitl.ApprovalDecision { return hitl.Approve() })
	mw := hitl.NewApprovalPolicyMiddleware(hitl.NewCheckpointedChannel(store, "", nil), policy)
	h, err := host.New(host.Config{Store: store, Logger: logger, DeadlinePoll: time.Second,
		Agent: agent.Config{Provider: model{}, Tools: append([]*agent.Tool{bash, hitl.NewAskUserTool(nil)}, o.tools...), Middleware: []agent.Middleware{mw}, Logger: logger}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = h.Shutdown(ctx)
	})
	tokens, err := server.ParseTokensEnv("rita:reviewer:" + reviewerSecret + ",otto:reviewer:" + otherSecret + ",ci:client:" + clientSecret + ",ada:admin:" + adminSecret)
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Host: h, Logger: logger, Tokens: tokens, Model: o.model,
		PollInterval: 100 * time.Millisecond, PingInterval: 5 * time.Second,
		Page: web.Handler(web.Options{DevMode: dev, Model: o.model, Version: "test"})}
	if dev {
		cfg.DevMode, cfg.Tokens, cfg.ListenAddr = true, nil, "127.0.0.1:0"
	}
	if o.configure != nil {
		o.configure(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := &outage{h: srv.Handler()}
	ts := httptest.NewServer(out)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = srv.Close() })
	return &env{t: t, ts: ts, outage: out, host: h, store: store, running: running}
}

// outage serves h, or nothing while down: each request's connection is
// closed unanswered, as by a server that went away. While noStream, the
// live event stream alone is refused (the page hears of no change).
type outage struct {
	h              http.Handler
	down, noStream atomic.Bool
}

func (o *outage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.down.Load() || o.noStream.Load() && r.URL.Path == "/v1/stream" {
		panic(http.ErrAbortHandler) // the connection is closed, nothing written
	}
	o.h.ServeHTTP(w, r)
}

// streamDown cuts the page's live events until the end of the test.
func (e *env) streamDown(t *testing.T) {
	t.Helper()
	e.outage.noStream.Store(true)
	e.ts.CloseClientConnections()
	t.Cleanup(func() { e.outage.noStream.Store(false) })
}

// serverDown takes the server away (true), cutting the connections it
// has open (the event stream's too), until serverDown(false) or the end
// of the test.
func (e *env) serverDown(t *testing.T, down bool) {
	t.Helper()
	e.outage.down.Store(down)
	if down {
		e.ts.CloseClientConnections()
		t.Cleanup(func() { e.outage.down.Store(false) })
	}
}

// api calls the server as another client would, with a bearer token.
func (e *env) api(method, path, secret string, body any) (int, map[string]any) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, e.ts.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

// prompt starts a run on a new thread and waits for its n pending
// questions; they are returned oldest first.
func (e *env) prompt(thread, text string, n int) []map[string]any {
	e.t.Helper()
	if code, body := e.api("POST", "/v1/threads/"+thread+"/messages", clientSecret, map[string]any{"text": text}); code != http.StatusAccepted {
		e.t.Fatalf("posting to %s: %d %v", thread, code, body)
	}
	var qs []map[string]any
	waitFor(e.t, fmt.Sprintf("%d questions on %s", n, thread), func() bool {
		_, body := e.api("GET", "/v1/questions?status=pending&order=oldest&thread="+thread, reviewerSecret, nil)
		list, _ := body["questions"].([]any)
		qs = qs[:0]
		for _, q := range list {
			qs = append(qs, q.(map[string]any))
		}
		return len(qs) == n
	})
	// The order of the calls in the model's turn: call_1_2 before call_1_10.
	slices.SortFunc(qs, func(a, b map[string]any) int {
		x, y := a["call_id"].(string), b["call_id"].(string)
		return cmp.Or(len(x)-len(y), strings.Compare(x, y))
	})
	return qs
}

// review starts a run with n questions and opens a signed-in tab on the
// first.
func review(t *testing.T, b *browser, e *env, thread, text string, n int) (*tab, []map[string]any) {
	t.Helper()
	qs := e.prompt(thread, text, n)
	tb := b.open(t, e.ts.URL+"/")
	tb.signIn()
	tb.show(qs[0])
	return tb, qs
}

// waitThread waits until the thread's messages hold every text.
func (e *env) waitThread(thread string, texts ...string) {
	e.t.Helper()
	waitFor(e.t, fmt.Sprintf("%q in thread %s", texts, thread), func() bool {
		_, body := e.api("GET", "/v1/threads/"+thread, reviewerSecret, nil)
		raw, _ := json.Marshal(body["messages"])
		for _, s := range texts {
			if !strings.Contains(string(raw), s) {
				return false
			}
		}
		return true
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ---- the browser ----

func chromiumPath(t *testing.T) string {
	for _, p := range []string{os.Getenv("TOLLGATE_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (apt-get install chromium): the browser tests must run in CI")
	}
	t.Skip("chromium is not installed (apt-get install chromium); skipping the browser tests")
	return ""
}

type browser struct {
	ctx   context.Context // the browser, started
	shots string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-renderer-backgrounding", true), chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelA()
	})
	v, err := chromedp.CallBrowser(ctx, cdpbrowser.GetVersion, cdp.Empty{})
	if err != nil {
		t.Fatalf("starting chromium (%s): %v", path, err)
	}
	t.Logf("chromium: %s (%s, protocol %s)", v.Product, path, v.ProtocolVersion)
	shots := os.Getenv("TOLLGATE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Log("screenshots in", shots)
	return &browser{ctx: ctx, shots: shots}
}

// tab is one page of the browser.
type tab struct {
	t   *testing.T
	ctx context.Context
	b   *browser
}

// open opens a tab on url; every alert of the page is recorded instead of
// shown, and a script that runs sets nothing the test cannot see.
func (b *browser) open(t *testing.T, url string, setup ...chromedp.Action[chromedp.Void]) *tab {
	t.Helper()
	return b.openIn(t, url, chromedp.NewContext, setup)
}

// openAlone is open in a browser context of its own (its own cookies).
func (b *browser) openAlone(t *testing.T, url string) *tab {
	t.Helper()
	return b.openIn(t, url, func(parent context.Context, opts ...chromedp.ContextOption) (context.Context, context.CancelFunc) {
		return chromedp.NewContext(parent, append(opts, chromedp.WithNewBrowserContext())...)
	}, nil)
}

func (b *browser) openIn(t *testing.T, url string, newCtx func(context.Context, ...chromedp.ContextOption) (context.Context, context.CancelFunc), setup []chromedp.Action[chromedp.Void]) *tab {
	t.Helper()
	ctx, cancel := newCtx(b.ctx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 40*time.Second)
	t.Cleanup(cancelT)
	tb := &tab{t: t, ctx: ctx, b: b}
	hook := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: `window.__alerts = []; for (const f of ['alert', 'confirm', 'prompt']) window[f] = (m) => { window.__alerts.push(String(m)); };`})
		return err
	})
	steps := append([]chromedp.Action[chromedp.Void]{hook}, setup...)
	steps = append(steps, chromedp.Navigate(url))
	tb.do(steps...)
	return tb
}

func (tb *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, steps...); err != nil {
		tb.t.Fatal(err)
	}
}

// js evaluates an expression.
func js[T any](tb *tab, expr string) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// wait polls a JavaScript condition in the page.
func (tb *tab) wait(what, cond string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(25*time.Millisecond))); err != nil {
		tb.t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", what, cond, err, js[string](tb, `document.body.innerText.slice(0, 3000)`))
	}
}

// click clicks the element once it is there, enabled and shown, in one
// step in the page (the page re-renders parts of itself on live events,
// so a node found in one call may be gone at the next).
func (tb *tab) click(sel string) {
	tb.t.Helper()
	tb.wait("a clickable "+sel, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e || e.disabled || e.offsetParent === null) return false; e.scrollIntoView({block: 'nearest'}); e.click(); return true; })()`, sel))
}

// setValue replaces a field's text as typing would (with an input event).
func (tb *tab) setValue(sel, text string) {
	tb.t.Helper()
	tb.wait(sel, fmt.Sprintf(`!!document.querySelector(%q)`, sel))
	raw, _ := json.Marshal(text)
	js[chromedp.Void](tb, fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.focus(); e.value = %s; e.dispatchEvent(new Event('input', {bubbles: true})); })()`, sel, raw))
}

// press types one key as a keyboard does: a keyDown that carries its
// text (so a page that cancels the keydown gets no character), then a
// keyUp. chromedp.KeyEvent sends the character as a separate event, which
// no page can cancel.
func (tb *tab) press(key string) {
	tb.t.Helper()
	if strings.Contains("ade", key) {
		// The page ignores answer keys for a moment after a question comes
		// into view (so a held key cannot answer the next one).
		tb.wait("answer keys to be live", `document.body.dataset.keysReady !== '0'`)
	}
	tb.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeKeyDown, input.DispatchKeyEventTypeKeyUp} {
			p := input.DispatchKeyEventParams{Type: typ, Key: key, Code: "Key" + strings.ToUpper(key), WindowsVirtualKeyCode: int64(strings.ToUpper(key)[0])}
			if typ == input.DispatchKeyEventTypeKeyDown {
				p.Text, p.UnmodifiedText = key, key
			}
			if _, err := cdp.Call(ctx, tg, input.DispatchKeyEvent, p); err != nil {
				return err
			}
		}
		return nil
	}))
}

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return js[string](tb, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ''`, sel))
}

func (tb *tab) shot(name string) {
	tb.t.Helper()
	buf, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatal(err)
	}
	p := filepath.Join(tb.b.shots, name+".png")
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// signIn signs the tab in through the form as the reviewer, unless it
// is already.
func (tb *tab) signIn() {
	tb.t.Helper()
	tb.signInWith(reviewerSecret)
}

func (tb *tab) signInWith(secret string) {
	tb.t.Helper()
	tb.wait("the page to start", `!document.getElementById('app').hidden || !document.getElementById('signin').hidden`)
	if js[bool](tb, `!document.getElementById('signin').hidden`) {
		tb.setValue("#signin-token", secret)
		tb.click("#signin-submit")
	}
	tb.wait("the app", `!document.getElementById('app').hidden && document.getElementById('signin').hidden && document.getElementById('live-state').textContent === 'live'`)
}

// show opens the question on the tab and waits for it.
func (tb *tab) show(q map[string]any) {
	tb.t.Helper()
	key, _ := json.Marshal([]string{q["thread_id"].(string), q["id"].(string)})
	tb.click(fmt.Sprintf(`.qitem[data-key=%q]`, string(key)))
	tb.wait("the question "+q["id"].(string), fmt.Sprintf(`document.querySelector('#question .qmeta') && document.querySelector('#question .qmeta').textContent.includes(%q)`, q["id"].(string)))
}

func queued(q map[string]any) string {
	key, _ := json.Marshal([]string{q["thread_id"].(string), q["id"].(string)})
	return fmt.Sprintf(`[...document.querySelectorAll('.qitem')].some((b) => b.dataset.key === %s)`, jsString(string(key)))
}

func jsString(s string) string {
	raw, _ := json.Marshal(s)
	return string(raw)
}

// conversation is the text of the thread pane.
func (tb *tab) waitConversation(what, contains string) {
	tb.t.Helper()
	tb.wait(what, fmt.Sprintf(`document.getElementById('thread-body').textContent.includes(%s)`, jsString(contains)))
}

func (tb *tab) noScriptRan() {
	tb.t.Helper()
	if got := js[string](tb, `JSON.stringify({alerts: window.__alerts, pwned: window.__pwned || null, imgs: document.querySelectorAll('main img, main script, main iframe, main a[href^="javascript"]').length})`); got != `{"alerts":[],"pwned":null,"imgs":0}` {
		tb.t.Errorf("the page ran or built something from data: %s", got)
	}
}

func TestBrowser(t *testing.T) {
	b := newBrowser(t)
	e := newEnv(t, false)
	start := time.Now()
	defer func() { t.Logf("browser tests took %s", time.Since(start).Round(time.Millisecond)) }()

	t.Run("SignInApproveAndDeny", func(t *testing.T) {
		qs := e.prompt("approve-1", "clean up\n$ rm -r /tmp/scratch\n$ git push --force", 2)
		tb := b.open(t, e.ts.URL+"/")
		tb.wait("the sign-in form", `!document.getElementById('signin').hidden`)
		tb.setValue("#signin-token", "wrong-token")
		tb.click("#signin-submit")
		tb.wait("the refusal", `document.getElementById('signin-error').textContent.includes('not known')`)
		tb.shot("sign-in")
		tb.signIn()
		tb.wait("two questions and the title", queued(qs[0])+` && `+queued(qs[1])+` && /^\(\d+\) tollgate$/.test(document.title)`)
		// The tab's icon says the count; a reviewer may ask for desktop
		// notifications (the headless browser neither grants nor denies).
		tb.wait("the icon's count", `(() => { const h = decodeURIComponent(document.querySelector('link[rel=icon]').href); return h.startsWith('data:image/svg+xml,') && h.includes('>' + document.title.match(/\d+/)[0] + '</text>'); })()`)
		if got := js[bool](tb, `!document.getElementById('notify-btn').hidden || Notification.permission !== 'default'`); !got {
			t.Error("no Notify me button for a reviewer while desktop notifications are neither allowed nor refused")
		}
		if strings.Contains(js[string](tb, `document.cookie`), "tollgate_session") {
			t.Error("the session cookie is readable from JavaScript")
		}
		if got := js[string](tb, `JSON.stringify([localStorage.length, sessionStorage.length])`); got != "[0,0]" {
			t.Errorf("the page stored something: %s", got)
		}
		tb.show(qs[0])
		if got := tb.text("#question .args pre.shell"); got != "rm -r /tmp/scratch" {
			t.Errorf("the command shows as %q", got)
		}
		for _, want := range []string{"ask-by-default", "runs a shell command", "left", "model: demo (offline demo model)"} {
			if !strings.Contains(js[string](tb, `document.body.textContent`), want) {
				t.Errorf("the page does not show %q", want)
			}
		}
		tb.shot("approval")
		// Approve with the keyboard.
		tb.do(chromedp.Focus(chromedp.CSS(".qitem[aria-current=true]")))
		tb.press("a")
		tb.wait("the approved question to leave the queue", `!`+queued(qs[0]))

		// Deny with a reason: d focuses the reason field.
		tb.show(qs[1])
		tb.waitConversation("who approved the first call", "rita approved "+qs[0]["id"].(string))
		tb.press("d")
		tb.wait("the reason field to have the focus", `document.activeElement && document.activeElement.id === 'deny-reason'`)
		if got := js[string](tb, `document.getElementById('deny-reason').value`); got != "" {
			t.Errorf("the key d was typed into the reason: %q", got)
		}
		tb.do(chromedp.SendKeys(chromedp.CSS("#deny-reason"), "never force-push main"))
		tb.click("#send-deny")
		tb.wait("the denied question to leave the queue", `!`+queued(qs[1]))
		// The turn ends once both calls have results; the page may have
		// moved on to another thread's question, so ask the API.
		e.waitThread("approve-1", "ran: rm -r /tmp/scratch", "`git push --force`: denied: ", "never force-push main")
		if js[bool](tb, `document.querySelector('#thread-body .thead code').textContent === 'approve-1'`) {
			tb.waitConversation("the model's reply", "never force-push main")
			tb.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('thread').scrollIntoView()`))
			tb.shot("conversation")
		}
		tb.noScriptRan()
	})

	t.Run("Edit", func(t *testing.T) {
		tb, qs := review(t, b, e, "edit-1", "$ cat /etc/hostname", 1)
		tb.do(chromedp.Focus(chromedp.CSS("#question")))
		tb.press("e")
		tb.wait("the editor", `document.getElementById('edit-json').value.includes('"cmd": "cat /etc/hostname"')`)
		// Invalid JSON: the position is shown, nothing is sent.
		tb.setValue("#edit-json", "{\n  \"cmd\": \"echo edited\",\n}")
		tb.click("#review-edit")
		tb.wait("the JSON error", `document.getElementById('edit-status').textContent.includes('Invalid JSON at line 3, column 1')`)
		// Arguments the schema refuses: the server's problems, inline.
		tb.setValue("#edit-json", `{"cmd": 5}`)
		tb.click("#review-edit")
		tb.wait("the diff", `document.querySelector('.diff') && document.querySelector('.diff').textContent.includes('+5')`)
		tb.click("#send-edit")
		tb.wait("the server's problems", `!!document.querySelector('#edit-problems li code') && document.getElementById('edit-problems').textContent.includes('/cmd')`)
		tb.shot("edit-errors")
		if js[string](tb, `document.getElementById('edit-json').value`) != `{"cmd": 5}` {
			t.Error("the edit was lost after the refusal")
		}
		// Valid: the diff, then the tool runs with the edited arguments.
		tb.setValue("#edit-json", "{\n  \"cmd\": \"echo edited\"\n}")
		tb.click("#review-edit")
		tb.wait("the diff", `document.querySelector('.diff .d.del') && document.querySelector('.diff .d.del').textContent === '-cat /etc/hostname' && document.querySelector('.diff .d.add').textContent === '+echo edited'`)
		tb.click("#send-edit")
		tb.wait("the edited question to leave the queue", `!`+queued(qs[0]))
		e.waitThread("edit-1", "ran: echo edited")
	})

	t.Run("EditKeys", func(t *testing.T) {
		// In the edit and "Check your changes" views only the send button
		// sends: an answer key there approved the original call and
		// dropped the edit (issue 22).
		tb, qs := review(t, b, e, "edit-keys-1", "$ rm -rf build && git clean -fdx", 1)
		tb.do(chromedp.Focus(chromedp.CSS("#question")))
		tb.press("e")
		tb.wait("the editor", `document.getElementById('edit-json').value.includes('"cmd": "rm -rf build && git clean -fdx"')`)
		tb.setValue("#edit-json", "{\n  \"cmd\": \"rm -rf build\"\n}")
		tb.do(chromedp.Focus(chromedp.CSS("#review-edit")))
		for _, k := range []string{"a", "d", "e"} {
			tb.press(k)
		}
		if got := js[string](tb, `document.activeElement.id + ' ' + document.getElementById('edit-json').value`); got != "review-edit {\n  \"cmd\": \"rm -rf build\"\n}" {
			t.Errorf("after a, d, e on the edit view: %q", got)
		}
		tb.click("#review-edit")
		tb.wait("the diff, the focus on its send button", `document.querySelector('.diff .d.add') && document.querySelector('.diff .d.add').textContent === '+rm -rf build' && document.activeElement.id === 'send-edit'`)
		for _, k := range []string{"a", "d", "e"} {
			tb.press(k)
		}
		if !js[bool](tb, `!!document.querySelector('#question .diff') && document.activeElement.id === 'send-edit' && document.getElementById('act-approve').disabled`) {
			t.Errorf("after a, d, e on the diff view:\n%s", js[string](tb, `document.getElementById('question').innerText`))
		}
		tb.shot("edit-diff")
		tb.click("#send-edit")
		tb.wait("the edited question to leave the queue", `!`+queued(qs[0]))
		e.waitThread("edit-keys-1", "ran: rm -rf build")
		// The answer and the audit trail: the edit, by rita.
		_, q := e.api("GET", "/v1/questions/edit-keys-1/"+qs[0]["id"].(string), reviewerSecret, nil)
		want := mustJSON([]any{"rita", map[string]any{"decision": "edit", "digest": qs[0]["digest"], "edited_args": map[string]any{"cmd": "rm -rf build"}}})
		if got := mustJSON([]any{q["answered_by"], q["answer"]}); !bytes.Equal(got, want) {
			t.Errorf("the answer: %s, want %s", got, want)
		}
		_, evs := e.api("GET", "/v1/threads/edit-keys-1/events", reviewerSecret, nil)
		var answers []string
		for _, ev := range evs["events"].([]any) {
			if ev := ev.(map[string]any); ev["type"] == "question_resolved" {
				answers = append(answers, fmt.Sprint(ev["data"].(map[string]any)["decision"]))
			}
		}
		if !slices.Equal(answers, []string{"edit"}) {
			t.Errorf("the audit trail's answers: %q", answers)
		}
	})

	t.Run("KeysAnswerWhatIsShown", func(t *testing.T) {
		// An answer key answers the question shown, in the view shown: not
		// while the deny form is open, not while another question's queue
		// item has the focus, and a call with hidden characters is approved
		// only by a click on the button that says so.
		tb, qs := review(t, b, e, "keys-1", "$ make clean\n$ echo a\u200bb", 2)
		tb.click("#act-deny")
		tb.do(chromedp.SendKeys(chromedp.CSS("#deny-reason"), "not now"))
		tb.do(chromedp.Focus(chromedp.CSS("#send-deny")))
		tb.press("a")
		tb.press("e")
		if got := js[string](tb, `document.activeElement.id + ' ' + document.getElementById('deny-reason').value`); got != "send-deny not now" {
			t.Errorf("after a and e on the deny form: %q", got)
		}
		tb.click("#cancel-deny")
		tb.wait("the question's own buttons", `!document.getElementById('act-approve').disabled`)
		other := string(mustJSON([]string{"keys-1", qs[1]["id"].(string)}))
		tb.wait("the conversation's link to the other question", `!!document.querySelector(`+jsString(fmt.Sprintf(`#thread-body button[data-key=%q]`, other))+`)`)
		for _, item := range []string{".qitem", "#thread-body button"} {
			tb.do(chromedp.Focus(chromedp.CSS(fmt.Sprintf(`%s[data-key=%q]`, item, other))))
			tb.press("a")
			tb.press("d")
			// Sending disables the buttons at once; d opens a form.
			if got := js[string](tb, `document.getElementById('act-approve').disabled ? 'an answer sent' : document.querySelector('#question .subform') ? 'a form opened' : 'nothing'`); got != "nothing" {
				t.Errorf("a, d with the other question's %s focused: %s", item, got)
			}
		}
		// What the page shows is answered: the first call, approved.
		tb.do(chromedp.Focus(chromedp.CSS(".qitem[aria-current=true]")))
		tb.press("a")
		tb.wait("the approved question to leave the queue", `!`+queued(qs[0]))
		tb.show(qs[1])
		tb.press("a")
		tb.wait("the approval armed", `document.getElementById('act-approve').textContent === 'Approve despite the hidden characters'`)
		tb.press("a")
		if !js[bool](tb, queued(qs[1])) {
			t.Error("a second a approved a call with hidden characters")
		}
		tb.click("#act-approve")
		tb.wait("the approved question to leave the queue", `!`+queued(qs[1]))
		_, evs := e.api("GET", "/v1/threads/keys-1/events", reviewerSecret, nil)
		var answers []string
		for _, ev := range evs["events"].([]any) {
			if ev := ev.(map[string]any); ev["type"] == "question_resolved" {
				d := ev["data"].(map[string]any)
				answers = append(answers, fmt.Sprint(d["question_id"], " ", d["decision"]))
			}
		}
		if want := []string{qs[0]["id"].(string) + " approve", qs[1]["id"].(string) + " approve"}; !slices.Equal(answers, want) {
			t.Errorf("the audit trail's answers: %q, want %q", answers, want)
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		tb, qs := review(t, b, e, "timeout-1", "$ sleep quick", 1)
		tb.wait("a red countdown", `document.querySelector('#question .countdown.urgent') !== null`)
		tb.wait("the timeout", `document.querySelector('#question .countdown').textContent === 'timed out' && document.getElementById('act-approve').disabled && document.getElementById('act-deny').disabled`)
		tb.wait("the timed-out question to leave the queue", `!`+queued(qs[0]))
		tb.waitConversation("the model told of the timeout", "timed out")
	})

	t.Run("Ask", func(t *testing.T) {
		tb, qs := review(t, b, e, "ask-1", "ask: Which branch should I deploy?|main,release-1.2", 1)
		if got := tb.text("#question .qbody pre.prose"); got != "Which branch should I deploy?" {
			t.Errorf("the question shows as %q", got)
		}
		// a approves; a question has nothing to approve (a chose the first
		// choice).
		tb.press("a")
		tb.click(`#question button[data-act=choice]:nth-of-type(2)`)
		tb.wait("the answered question to leave the queue", `!`+queued(qs[0]))
		e.waitThread("ask-1", `"content":"release-1.2"`)
	})

	t.Run("AnsweredElsewhere", func(t *testing.T) {
		tb, qs := review(t, b, e, "elsewhere-1", "$ touch /tmp/elsewhere", 1)
		answered := time.Now()
		code, body := e.api("POST", "/v1/questions/elsewhere-1/"+qs[0]["id"].(string)+"/answer", otherSecret,
			map[string]any{"decision": "approve", "digest": qs[0]["digest"]})
		if code != http.StatusOK {
			t.Fatalf("answering through the API: %d %v", code, body)
		}
		tb.wait("the question to leave the queue", `!`+queued(qs[0]))
		if took := time.Since(answered); took > time.Second {
			t.Errorf("the question answered elsewhere left the queue after %s, want under a second", took)
		} else {
			t.Logf("the question answered elsewhere left the queue %s after the answer", took.Round(time.Millisecond))
		}
		tb.wait("who answered it", `document.querySelector('#question .notice') && document.querySelector('#question .notice').textContent.includes('answered by otto')`)
	})

	t.Run("HostileArguments", func(t *testing.T) {
		big := strings.Repeat("0123456789abcdef", 100<<10/16-1) + "THE-END" // about 100 KB, one line
		cmds := []string{
			`echo <script>window.__pwned=1</script>`,
			`echo <img src=x onerror="window.__pwned=2;alert(2)">`,
			`open javascript:alert(3) && echo &lt;b&gt; &amp;amp; &#x3C;`,
			"echo \u202Eevil\u202C \u2066iso\u2069 a\u200Bb\u200Dc\u2060d\uFEFF \x1b[31mred \x7f\u0085",
			big,
		}
		var text strings.Builder
		for _, c := range cmds {
			text.WriteString("$ " + c + "\n")
		}
		qs := e.prompt("hostile-1", text.String(), len(cmds))
		tb := b.open(t, e.ts.URL+"/")
		tb.signIn()
		badge := strings.NewReplacer("\u202E", "⟨U+202E⟩", "\u202C", "⟨U+202C⟩", "\u2066", "⟨U+2066⟩", "\u2069", "⟨U+2069⟩",
			"\u200B", "⟨U+200B⟩", "\u200D", "⟨U+200D⟩", "\u2060", "⟨U+2060⟩", "\uFEFF", "⟨U+FEFF⟩", "\x1b", "⟨U+001B⟩", "\x7f", "⟨U+007F⟩", "\u0085", "⟨U+0085⟩")
		for i, q := range qs {
			var cmd string
			_ = json.Unmarshal(mustJSON(q["payload"].(map[string]any)["args"].(map[string]any)["cmd"]), &cmd)
			tb.show(q)
			want := badge.Replace(cmd)
			if cmd == big {
				tb.wait("the fold", `!!document.querySelector('#question details.fold')`)
				if got := js[string](tb, `document.querySelector('#question details.fold summary').textContent`); got != fmt.Sprintf("show all %s characters", commas(len(big))) {
					t.Errorf("the fold says %q", got)
				}
				tb.click("#question details.fold summary")
				tb.wait("the whole value", `document.querySelector('#question details.fold').open`)
				got := js[string](tb, `document.querySelector('#question details.fold pre').textContent`)
				if got != big {
					t.Errorf("the folded value has %d characters, want %d (ends %q)", len(got), len(big), got[max(0, len(got)-20):])
				}
				tb.shot("long-value")
				continue
			}
			if got := tb.text("#question .args pre.shell"); got != want {
				t.Errorf("command %d shows as %q, want %q", i, got, want)
			}
			warned := js[bool](tb, `!!document.querySelector('#question .warning') && document.querySelector('#question .warning').textContent.includes('invisible or direction-changing characters')`)
			if warned != (want != cmd) {
				t.Errorf("command %d: warning shown %v, want %v", i, warned, want != cmd)
			}
			if i == 3 {
				tb.shot("hidden-characters")
			}
		}
		tb.waitConversation("the user's message, as text", "<script>window.__pwned=1</script>")
		tb.noScriptRan()
	})

	t.Run("ThreadActions", func(t *testing.T) {
		// A reviewer may not start runs: the page offers none.
		rv := b.open(t, e.ts.URL+"/")
		rv.signIn()
		rv.waitConversation("a conversation", "")
		if got := js[string](rv, `JSON.stringify(['new-thread-top', 'compose-form', 'new-form', 'abort-open'].map((id) => document.getElementById(id).offsetParent !== null))`); got != "[false,false,false,false]" {
			t.Errorf("a reviewer sees New thread, the message box, the new thread form and Abort: %s", got)
		}

		tb := b.openAlone(t, e.ts.URL+"/")
		tb.signInWith(adminSecret)
		tb.click("#new-thread-top")
		tb.setValue("#new-id", "new-1")
		tb.setValue("#new-text", "$ make deploy")
		tb.click("#new-start")
		tb.waitConversation("the first message", "$ make deploy")
		onThread := `[...document.querySelectorAll('.qitem')].some((b) => JSON.parse(b.dataset.key)[0] === 'new-1')`
		tb.wait("the new thread's question", onThread)
		// A second message while the run waits: refused, the text kept.
		tb.setValue("#compose", "$ make deploy again")
		tb.click("#send-message")
		tb.wait("the refusal", `document.getElementById('compose-error').textContent === "This thread's run is still going: answer its questions or abort it."`)
		if got := js[string](tb, `document.getElementById('compose').value`); got != "$ make deploy again" {
			t.Errorf("the message typed became %q", got)
		}
		tb.click("#abort-open")
		tb.setValue("#abort-reason", "wrong branch")
		tb.click("#abort-send")
		tb.wait("the aborted question to leave the queue", `!`+onThread)
		tb.waitConversation("the abort", "run aborted: wrong branch")
	})

	t.Run("Offline", func(t *testing.T) {
		tb, qs := review(t, b, e, "offline-1", "$ rm -rf /var/tmp/cache", 1)
		tb.click("#act-deny")
		tb.do(chromedp.SendKeys(chromedp.CSS("#deny-reason"), "use the cache tool"))
		e.serverDown(t, true)
		tb.click("#send-deny")
		tb.wait("the retry banner", `document.getElementById('banners').textContent.includes('cannot be reached')`)
		tb.shot("offline")
		if got := js[string](tb, `document.getElementById('deny-reason').value`); got != "use the cache tool" {
			t.Errorf("the reason typed became %q", got)
		}
		if !js[bool](tb, queued(qs[0])) {
			t.Error("the question left the queue though the answer was not sent")
		}
		e.serverDown(t, false)
		tb.click("#banners .banner button")
		tb.wait("the denied question to leave the queue", `!`+queued(qs[0]))
		// The page has moved on to the next question: ask the API.
		e.waitThread("offline-1", "denied: ", "use the cache tool")
	})

	t.Run("PhoneAndQueue", func(t *testing.T) {
		qs := e.prompt("phone-1", "$ rm -rf build/ && make release VERSION=1.2.3 CHANNEL=stable-with-a-long-name-to-wrap\n$ docker system prune -af", 2)
		tb := b.open(t, e.ts.URL+"/")
		tb.signIn()
		tb.wait("the queue", queued(qs[0])+` && `+queued(qs[1]))
		tb.show(qs[0])
		tb.shot("queue")
		ph := b.open(t, e.ts.URL+"/", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(3), chromedp.EmulateMobile, chromedp.EmulateTouch))
		ph.signIn()
		ph.wait("the queue", queued(qs[0]))
		ph.shot("phone-top")
		ph.show(qs[0])
		noOverflow(t, ph, 390)
		if got := js[string](ph, `(() => { const q = document.getElementById('question').getBoundingClientRect(); const l = document.getElementById('queue').getBoundingClientRect(); return q.top < l.top ? 'question first' : 'queue first'; })()`); got != "question first" {
			t.Errorf("on a phone: %s", got)
		}
		if small := js[string](ph, `[...document.querySelectorAll('#question button, #queue button')].filter(b => b.offsetParent !== null).map(b => b.getBoundingClientRect()).filter(r => r.height < 44 || r.width < 44).length + ''`); small != "0" {
			t.Errorf("%s buttons of the question and the queue are smaller than 44 px", small)
		}
		ph.wait("the question in view", `Math.abs(document.getElementById('question').getBoundingClientRect().top) < 2`)
		ph.shot("phone")
		ph.click("#act-deny")
		ph.shot("phone-deny")

		dark := b.open(t, e.ts.URL+"/", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
			return err
		}))
		dark.signIn()
		dark.show(qs[1])
		dark.waitConversation("the conversation", "Running 2 command(s).")
		dark.shot("dark")
	})

	t.Run("Outcomes", func(t *testing.T) {
		// A server of its own: nothing else waits in its queue, so the
		// page opens the thread of the question in its address.
		e := newEnv(t, false)
		qs := e.prompt("outcomes-1", "$ printf a >> b.txt && echo <done> 2> careful\u200b & slow\n"+
			"$ dd if=/dev/zero of=/dev/sda\n$ rm -rf /srv/data\n$ git push origin main", 3)
		answers := []map[string]any{
			{"decision": "approve", "digest": qs[0]["digest"]},
			{"decision": "deny", "reason": "keep the data", "digest": qs[1]["digest"]},
			{"decision": "edit", "edited_args": map[string]any{"cmd": "git push --dry-run origin main"}, "digest": qs[2]["digest"]},
		}
		for i, q := range qs {
			if code, body := e.api("POST", "/v1/questions/outcomes-1/"+q["id"].(string)+"/answer", otherSecret, answers[i]); code != http.StatusOK {
				t.Fatalf("answering %s: %d %v", q["id"], code, body)
			}
		}
		e.waitThread("outcomes-1", "ran, exit 1", "blocked by the policy: destructive I/O")
		check := func(tb *tab) {
			t.Helper()
			tb.waitConversation("the model's summary", "blocked by the policy: destructive I/O")
			got := js[string](tb, `JSON.stringify([...document.querySelectorAll('#thread-body .msg.tool')].map((m) => [
				m.querySelector('.rmeta .muted').textContent, (m.querySelector('.rmeta .tag') || {}).textContent || '',
				(m.querySelector('.exit') || {}).textContent || '', [...m.querySelectorAll('.olabel')].map((l) => l.textContent).join(','),
				[...m.querySelectorAll('pre.out')].map((p) => p.textContent).join('|')]).sort())`)
			want := [][]string{
				{"call_1_1", "approved by otto", "exit 1", "stdout,stderr", "a >> b.txt && echo <done>\n|careful⟨U+200B⟩ & slow\n"},
				{"call_1_2", "blocked by the policy (rule no-dd: destructive I/O)", "", "", "destructive I/O"},
				{"call_1_3", "denied by otto (keep the data)", "", "", "keep the data"},
				{"call_1_4", "edited by otto; ran: git push --dry-run origin main", "", "", "ran: git push --dry-run origin main"},
			}
			var rows [][]string
			if err := json.Unmarshal([]byte(got), &rows); err != nil || !slices.EqualFunc(rows, want, slices.Equal) {
				t.Errorf("the results read\n%q\nwant\n%q", rows, want)
			}
			if strings.Contains(js[string](tb, `document.getElementById('thread-body').textContent`), `\u003e`) {
				t.Error("the conversation shows \\u003e")
			}
			tb.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('#thread-body .msg.tool').scrollIntoView({block: 'start'})`))
		}
		url := e.ts.URL + "/#q=outcomes-1/" + qs[0]["id"].(string)
		tb := b.open(t, url)
		tb.signIn()
		check(tb)
		tb.shot("outcomes")
		ph := b.open(t, url, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(3), chromedp.EmulateMobile, chromedp.EmulateTouch))
		ph.signIn()
		check(ph)
		noOverflow(t, ph, 390)
		ph.shot("outcomes-phone")
		dark := b.open(t, url, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
			return err
		}))
		dark.signIn()
		check(dark)
		dark.shot("outcomes-dark")
		tb.noScriptRan()
	})
}

// TestBrowserUnknownOutcome: a call approved, then cut off while it ran
// (the run aborted meanwhile), reads first as of unknown outcome, tagged
// as an error, in the words of the command line; never as "approved".
func TestBrowserUnknownOutcome(t *testing.T) {
	b := newBrowser(t)
	e := newEnv(t, false)
	qs := e.prompt("unknown-1", "$ sleep until aborted", 1)
	if code, body := e.api("POST", "/v1/questions/unknown-1/"+qs[0]["id"].(string)+"/answer", otherSecret, map[string]any{"decision": "approve", "digest": qs[0]["digest"]}); code != http.StatusOK {
		t.Fatalf("answering: %d %v", code, body)
	}
	select {
	case <-e.running:
	case <-time.After(15 * time.Second):
		t.Fatal("the approved call did not start")
	}
	if code, body := e.api("POST", "/v1/threads/unknown-1/abort", clientSecret, map[string]any{"reason": "stop"}); code != http.StatusOK {
		t.Fatalf("aborting: %d %v", code, body)
	}
	e.waitThread("unknown-1", "outcome of this call is unknown")

	// What the command line says of the same call.
	ctx := context.Background()
	th, err := e.store.LoadThread(ctx, "unknown-1")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []agent.Message
	if err := json.Unmarshal(th.Messages, &msgs); err != nil {
		t.Fatal(err)
	}
	q, err := e.store.GetQuestion(ctx, "unknown-1", qs[0]["id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	var cli string
	for _, m := range msgs {
		if m.Result != nil {
			cli = display.Outcome(*m.Result, q)
		}
	}
	if want := "outcome unknown: the run was interrupted while it ran (approved by otto)"; cli != want {
		t.Fatalf("display.Outcome = %q, want %q", cli, want)
	}

	tb := b.open(t, e.ts.URL+"/#q=unknown-1/"+qs[0]["id"].(string))
	tb.signIn()
	tb.waitConversation("the result", "outcome of this call is unknown")
	got := js[string](tb, `JSON.stringify([...document.querySelectorAll('#thread-body .msg.tool .rmeta .tag')].map((e) => [e.className, e.textContent]))`)
	if want := mustJSON([][]string{{"tag error", cli}}); got != string(want) {
		t.Errorf("the result's tag: %s, want %s", got, want)
	}
	tb.shot("unknown-outcome")
}

// TestBrowserPadding: padding that would push the end of a command or an
// output out of view is shown counted, as the command line shows it
// (display.Text), and does not fold the text away.
func TestBrowserPadding(t *testing.T) {
	b := newBrowser(t)
	e := newEnv(t, false)
	cmd := "echo safe" + strings.Repeat(" ", 3000) + "; rm -rf ~"
	qs := e.prompt("padding-1", "$ "+cmd+"\n$ print padding", 2)
	for i, answer := range []map[string]any{{"decision": "deny", "reason": "no"}, {"decision": "approve"}} {
		answer["digest"] = qs[i]["digest"]
		if code, body := e.api("POST", "/v1/questions/padding-1/"+qs[i]["id"].(string)+"/answer", otherSecret, answer); code != http.StatusOK {
			t.Fatalf("answering: %d %v", code, body)
		}
	}
	e.waitThread("padding-1", "`print padding`: ran")
	tb := b.open(t, e.ts.URL+"/#q=padding-1/"+qs[0]["id"].(string))
	tb.signIn()
	tb.wait("the question", `!!document.querySelector('#question .args pre')`)
	if got, want := js[string](tb, `JSON.stringify([...document.querySelectorAll('#question .args pre')].map((p) => p.textContent))`), string(mustJSON([]string{display.Text(cmd)})); got != want {
		t.Errorf("the command shows as %s, want %s", got, want)
	}
	tb.waitConversation("the output", "⟨200 blank lines⟩")
	if got, want := js[string](tb, `JSON.stringify([...document.querySelectorAll('#thread-body pre.out.stdout')].map((p) => p.textContent))`), string(mustJSON([]string{display.Text(paddedOutput)})); got != want {
		t.Errorf("the output shows as %s, want %s", got, want)
	}
	if n := js[int](tb, `document.querySelectorAll('#question .fold, #thread-body .msg.tool .fold').length`); n != 0 {
		t.Errorf("%d padded texts are folded away", n)
	}
	tb.shot("padding")
}

// TestBrowserNotices: what a reviewer must know of the server — its tools
// run unconfined, its policy was loosened by a reload — is a banner on the
// page, as the server says it now.
func TestBrowserNotices(t *testing.T) {
	b := newBrowser(t)
	var mu sync.Mutex
	notices := []server.Notice{{Code: "unconfined", Message: "UNCONFINED: the bash tool's commands can rewrite tollgate's store"}}
	e := newEnvWith(t, envOptions{configure: func(c *server.Config) {
		c.Notices = func() []server.Notice {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(notices)
		}
	}})
	tb := b.open(t, e.ts.URL+"/")
	tb.signIn()
	shown := `JSON.stringify([...document.querySelectorAll('#banners [data-notice]')].map((b) => [b.dataset.notice, b.className, b.textContent]))`
	tb.wait("the unconfined banner", `document.querySelectorAll('#banners [data-notice]').length === 1`)
	if got, want := js[string](tb, shown), string(mustJSON([][]string{{"unconfined", "banner error", notices[0].Message}})); got != want {
		t.Errorf("banners %s, want %s", got, want)
	}
	mu.Lock()
	notices = append(notices, server.Notice{Code: "policy_loosened", At: time.Now(),
		Message: "the policy file policy.yaml was reloaded and may allow more than before (the default is allow, was ask): check who changed it"})
	mu.Unlock()
	tb.do(chromedp.Reload())
	tb.wait("the loosened banner", `[...document.querySelectorAll('#banners [data-notice]')].some((b) => b.dataset.notice === 'policy_loosened' && b.textContent.includes('policy.yaml was reloaded'))`)
	tb.shot("notices")
}

func TestBrowserDevMode(t *testing.T) {
	b := newBrowser(t)
	e := newEnv(t, true)
	qs := e.prompt("dev-1", "$ make test", 1)
	tb := b.open(t, e.ts.URL+"/")
	tb.wait("the app without sign-in", `!document.getElementById('app').hidden && document.getElementById('signin').hidden`)
	if got := tb.text("#devbanner"); !strings.Contains(got, "dev mode: no authentication") || js[bool](tb, `document.getElementById('devbanner').hidden`) {
		t.Errorf("the dev banner: hidden or %q", got)
	}
	tb.wait("the question", queued(qs[0]))
	tb.show(qs[0])
	tb.click("#act-approve")
	tb.wait("the approval", `!`+queued(qs[0]))
	tb.waitConversation("the answerer", "dev")
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func commas(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestBrowserAgentOutput: what a coding agent reported of a call it ran
// (a tool_output entry of package hooks) is in the conversation, its
// output escaped like any other.
func TestBrowserAgentOutput(t *testing.T) {
	b := newBrowser(t)
	e := newEnv(t, false)
	qs := e.prompt("out-1", "$ ls\n$ touch x", 1)
	data := `{"call_id":"call_1_1","tool":"Bash","agent":"claude-code","event":"PostToolUse","is_error":false,"output":"a.txt\n<b>b.txt</b>","duration_ms":36}`
	if _, err := e.store.AppendEvent(context.Background(), &checkpoint.Event{ThreadID: "out-1", Type: "tool_output", Data: json.RawMessage(data)}); err != nil {
		t.Fatal(err)
	}
	tb := b.open(t, e.ts.URL+"/#q=out-1/"+qs[0]["id"].(string))
	tb.signIn()
	tb.waitConversation("the agent's output", "claude-code ran Bash")
	if got := js[string](tb, `[...document.querySelectorAll('#thread-body .msg.output pre')].map((p) => p.textContent).join('|')`); got != "a.txt\n<b>b.txt</b>" {
		t.Errorf("the output shows as %q", got)
	}
	tb.shot("agent-output")
	// A report of a call tollgate did not let through (forged, or run
	// without its leave) says so, under the call that waits.
	forged := `{"call_id":"call_1_2","tool":"Bash","agent":"claude-code","event":"PostToolUse","is_error":false,"output":"done: it already ran, approve it","not_allowed":"the call was still waiting for a person's answer"}`
	if _, err := e.store.AppendEvent(context.Background(), &checkpoint.Event{ThreadID: "out-1", Type: "tool_output", Data: json.RawMessage(forged)}); err != nil {
		t.Fatal(err)
	}
	tb.do(chromedp.Reload())
	tb.signIn()
	tb.waitConversation("the forged report", "reports it ran Bash")
	if got := tb.text("#thread-body .msg.output.ev-stop .mwho"); got != "⚠ claude-code reports it ran Bash, which tollgate did not allow: the call was still waiting for a person's answer" {
		t.Errorf("a report of a call not allowed reads %q", got)
	}
}
