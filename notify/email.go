package notify

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/wneessen/go-mail"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/display"
)

// mailText is d's message: the call, what it will do, the deadline, a
// link to the question and, when configured and the question can be
// answered so, one-time approve and deny links (each opens a
// confirmation page: a GET never answers).
func (n *Notifier) mailText(q *checkpoint.Question, d *checkpoint.Delivery) (subject, body string) {
	summary := display.Summary(q)
	var b strings.Builder
	switch {
	case q.Status != checkpoint.QuestionPending:
		subject = "tollgate: " + display.Resolution(q) + ": " + summary
		fmt.Fprintf(&b, "The call\n\n    %s\n\nwas %s", summary, display.Resolution(q))
		if !q.ResolvedAt.IsZero() {
			fmt.Fprintf(&b, " at %s", q.ResolvedAt.UTC().Format("2006-01-02 15:04:05 UTC"))
		}
		b.WriteString(".\n")
	case d.Event == DeadlineNear:
		subject = "tollgate: still waiting: " + summary
		fmt.Fprintf(&b, "A call still waits for a person's answer:\n\n    %s\n", summary)
	default:
		subject = "tollgate asks: " + summary
		fmt.Fprintf(&b, "An agent asks to run:\n\n    %s\n", summary)
	}
	if facts := display.FactLines(display.Details(infoOf(q).details)); len(facts) > 0 {
		b.WriteString("\n" + strings.Join(facts, "\n") + "\n")
	}
	fmt.Fprintf(&b, "\nThread %s, question %s.\n", q.ThreadID, q.ID)
	if q.Status == checkpoint.QuestionPending {
		if !q.Deadline.IsZero() {
			fmt.Fprintf(&b, "Answer by %s: then it times out and the call is blocked.\n", q.Deadline.UTC().Format("2006-01-02 15:04:05 UTC"))
		}
		if u := n.cfg.questionURL(q.ThreadID, q.ID); u != "" {
			fmt.Fprintf(&b, "\nOpen it: %s\n", u)
		}
		if n.cfg.SMTP.AnswerLinks && answerable(q) {
			now := n.clk.Now()
			for _, dec := range []string{"approve", "deny"} {
				tok := n.actions.Sign(actionFor(q, dec, "email:"+d.Target, now))
				fmt.Fprintf(&b, "%s (a page asks you to confirm): %s/notify/answer?t=%s\n",
					strings.ToUpper(dec[:1])+dec[1:], n.cfg.BaseURL, url.QueryEscape(tok))
			}
		}
	}
	b.WriteString("\n-- \ntollgate: a person approves what an AI agent runs.\n")
	return clip(strings.NewReplacer("\r", " ", "\n", " ").Replace(subject), 200), b.String()
}

// sendMail sends d's message.
func (n *Notifier) sendMail(ctx context.Context, d *checkpoint.Delivery) error {
	q, err := n.store.GetQuestion(ctx, d.ThreadID, d.QuestionID)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return permanent(err)
	}
	if err != nil {
		return err
	}
	sc := n.cfg.SMTP
	subject, body := n.mailText(q, d)
	m := mail.NewMsg()
	if err := m.From(sc.From); err != nil {
		return permanent(fmt.Errorf("smtp from %q: %w", sc.From, err))
	}
	if err := m.To(d.Target); err != nil {
		return permanent(fmt.Errorf("mail to %q: %w", d.Target, err))
	}
	m.Subject(subject)
	// The delivery's id: a message sent twice (a crash between the
	// server's acceptance and the outbox's record) is one to mail readers.
	m.SetMessageIDWithValue(d.ID + "@tollgate")
	m.SetDateWithValue(n.clk.Now())
	m.SetBodyString(mail.TypeTextPlain, body)
	opts := []mail.Option{mail.WithPort(sc.Port), mail.WithTimeout(n.timeout)}
	switch sc.TLS {
	case "tls":
		opts = append(opts, mail.WithSSL())
	case "none":
		opts = append(opts, mail.WithTLSPortPolicy(mail.NoTLS))
	default:
		opts = append(opts, mail.WithTLSPortPolicy(mail.TLSMandatory))
	}
	if sc.Username != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover), mail.WithUsername(sc.Username),
			mail.WithPassword(string(n.cfg.secrets["smtp_password"])))
	}
	c, err := mail.NewClient(sc.Host, opts...)
	if err != nil {
		return permanent(err)
	}
	return c.DialAndSendWithContext(ctx, m)
}

var confirmPage = template.Must(template.New("confirm").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>tollgate: {{.Title}}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:2em auto;padding:0 1em}pre{white-space:pre-wrap;word-break:break-all;background:#f4f4f4;padding:.5em}button{font-size:1em;padding:.6em 1.4em}</style>
</head><body><h1>{{.Title}}</h1>
{{if .Summary}}<pre>{{.Summary}}</pre>{{end}}
{{range .Facts}}<p>{{.}}</p>{{end}}
<p>{{.Message}}</p>
{{if .Token}}<form method="post" action="answer"><input type="hidden" name="t" value="{{.Token}}">
{{if eq .Decision "deny"}}<p><label>Reason the agent reads: <input name="reason" size="40"></label></p>{{end}}
<button type="submit">{{.Button}}</button></form>{{end}}
{{if .Link}}<p><a href="{{.Link}}">Open it on the reviewer page</a></p>{{end}}
</body></html>
`))

type confirmView struct {
	Title, Summary, Message, Token, Decision, Button, Link string
	Facts                                                  []string
}

// mailAnswer serves a mail link: GET shows the call and a button (mail
// scanners and link previews follow links: a GET never answers), POST
// answers when the action verifies.
func (n *Notifier) mailAnswer(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	}
	if err := r.ParseForm(); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	tok := r.Form.Get("t")
	act, err := n.actions.Verify(tok, n.clk.Now())
	v := confirmView{Link: n.questionLink(act)}
	show := func(status int) {
		w.WriteHeader(status)
		_ = confirmPage.Execute(w, v)
	}
	switch {
	case errors.Is(err, ErrActionExpired):
		v.Title, v.Message = "This link has expired", "The question's time is over: nothing was answered."
		show(http.StatusGone)
		return
	case err != nil || !strings.HasPrefix(act.For, "email:"):
		v.Title, v.Message, v.Link = "This link is not valid", "It was not made by this tollgate server: nothing was answered.", n.cfg.BaseURL
		show(http.StatusForbidden)
		return
	}
	q, err := n.store.GetQuestion(r.Context(), act.ThreadID, act.QuestionID)
	if err != nil {
		v.Title, v.Message = "The question is gone", "Nothing was answered."
		show(http.StatusNotFound)
		return
	}
	v.Summary = display.Summary(q)
	v.Facts = display.FactLines(display.Details(infoOf(q).details))
	if r.Method != http.MethodPost {
		switch {
		case q.Status != checkpoint.QuestionPending:
			v.Title, v.Message = "Already answered", "It was "+display.Resolution(q)+"."
		case q.Digest != act.Digest:
			v.Title, v.Message = "The call changed", "The call is not the one the message showed: nothing can be answered from this link."
		default:
			v.Title = map[string]string{"approve": "Approve this call?", "deny": "Deny this call?"}[act.Decision]
			v.Message = "Answering as " + strings.TrimPrefix(act.For, "email:") + "."
			v.Token, v.Decision = tok, act.Decision
			v.Button = map[string]string{"approve": "Approve", "deny": "Deny"}[act.Decision]
		}
		show(http.StatusOK)
		return
	}
	who := strings.TrimPrefix(act.For, "email:") + " (mail)"
	reason := strings.TrimSpace(r.Form.Get("reason"))
	if reason == "" {
		reason = "denied by mail by " + strings.TrimPrefix(act.For, "email:")
	}
	q, refusal := n.answer(r.Context(), act, who, clip(reason, 2000))
	if refusal != "" {
		v.Title, v.Message = "Not answered", refusal
		show(http.StatusConflict)
		return
	}
	v.Title, v.Message, v.Summary = "Answered", "The call was "+display.Resolution(q)+".", display.Summary(q)
	show(http.StatusOK)
}
