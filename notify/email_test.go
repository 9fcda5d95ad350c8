package notify_test

import (
	"context"
	"io"
	"mime/quotedprintable"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/clock"
	"github.com/tollgate-ai/tollgate/notify"
)

// A mail with a link to the question and one-time approve and deny
// links: a GET (a mail scanner following the link) shows a confirmation
// page and answers nothing; the page's POST answers, once.
func TestMailLinksConfirmBeforeAnswering(t *testing.T) {
	store := memory.New()
	clk := clock.NewFake(time.Now())
	smtp := newSMTP(t)
	_, port, _ := strings.Cut(smtp.ln.Addr().String(), ":")
	cfg, err := notify.Parse("n.yaml", []byte(`
base_url: https://tollgate.example.com
default: [team]
smtp: {host: 127.0.0.1, port: `+port+`, tls: none, from: tollgate@example.com, answer_links: true}
groups:
  team: {email: [alice@example.com]}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := notify.New(notify.Options{Config: cfg, Store: store, Clock: clk, Answerer: &answerer{store: store, now: clk.Now}})
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	ask(t, store, "t1", "q1", "git push --force", clk.Now(), 10*time.Minute, map[string]any{"why": "rule push asks"})
	n.Wake()
	waitFor(t, "the mail", smtp.got, func() bool { return len(smtp.messages()) == 1 })
	raw := smtp.messages()[0]
	head, body, _ := strings.Cut(raw, "\r\n\r\n")
	dec, _ := io.ReadAll(quotedprintable.NewReader(strings.NewReader(body)))
	msg := head + "\n\n" + string(dec)
	for _, want := range []string{"Subject: tollgate asks: bash: git push --force", "why: rule push asks", "https://tollgate.example.com/#q=t1/q1", "Message-ID: <msg_"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the mail lacks %q:\n%s", want, msg)
		}
	}
	links := regexp.MustCompile(`https://tollgate\.example\.com/notify/answer\?t=[^\s]+`).FindAllString(msg, -1)
	if len(links) != 2 {
		t.Fatalf("links %q in:\n%s", links, msg)
	}
	u, _ := url.Parse(links[0])
	tok := u.Query().Get("t")
	h := n.Handler()
	get := httptest.NewRecorder()
	h.ServeHTTP(get, httptest.NewRequest(http.MethodGet, "/notify/answer?t="+url.QueryEscape(tok), nil))
	if get.Code != 200 || !strings.Contains(get.Body.String(), "Approve this call?") || !strings.Contains(get.Body.String(), "git push --force") {
		t.Fatalf("GET: %d %s", get.Code, get.Body)
	}
	if q, _ := store.GetQuestion(context.Background(), "t1", "q1"); q.Status != checkpoint.QuestionPending {
		t.Fatalf("a GET answered: %+v", q)
	}
	post := func(token string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/notify/answer", strings.NewReader("t="+url.QueryEscape(token)))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		h.ServeHTTP(w, r)
		return w
	}
	if w := post(tok); w.Code != 200 || !strings.Contains(w.Body.String(), "approved by alice@example.com (mail)") {
		t.Fatalf("POST: %d %s", w.Code, w.Body)
	}
	if w := post(tok); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "Already approved") {
		t.Errorf("a second POST: %d %s", w.Code, w.Body)
	}
	if w := post(tok[:len(tok)-3] + "abc"); w.Code != http.StatusForbidden {
		t.Errorf("an altered link: %d", w.Code)
	}
	// The answer's own mail follows.
	n.Wake()
	waitFor(t, "the answer's mail", smtp.got, func() bool { return len(smtp.messages()) == 2 })
	if m := smtp.messages()[1]; !strings.Contains(m, "approved by alice@example.com (mail)") || strings.Contains(m, "notify/answer") {
		t.Errorf("the second mail:\n%s", m)
	}
}
