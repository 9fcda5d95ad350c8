package notify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/display"
)

// Slack's action ids of tollgate's buttons.
const (
	slackApprove = "tollgate_approve"
	slackDeny    = "tollgate_deny"
	slackOpen    = "tollgate_open"
)

// eventPosted is the audit event that records a Slack message posted
// about a question (its channel and ts): the message a resolution
// updates, whichever process or replica posted it.
const eventPosted = "notify_posted"

// blockID names a question in its message's buttons, so that a press is
// checked against the question the message is about (an action of
// another question's message is refused).
func blockID(threadID, questionID string) string {
	h := sha256.Sum256([]byte(threadID + "\x00" + questionID))
	return "tollgate_" + hex.EncodeToString(h[:16])
}

// plain is a plain-text object (Slack renders no markup in it: nothing
// of the call can format itself), cut to Slack's 3000 characters.
func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, clip(s, 2900), false, false)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// slackDate is Slack's way to show a time in each reader's own zone.
func slackDate(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time_secs}|%s>", t.Unix(), t.UTC().Format(time.RFC3339))
}

// slackMessage is q's message as it is now: the call, what it will do,
// the rule, the deadline and the buttons while it waits; who answered,
// what and when once it is resolved.
func (n *Notifier) slackMessage(q *checkpoint.Question, channel string) ([]slack.Block, string) {
	summary := display.Summary(q)
	var blocks []slack.Block
	head := "tollgate asks: " + summary
	if q.Status != checkpoint.QuestionPending {
		head = "tollgate asked: " + summary
	}
	blocks = append(blocks, slack.NewSectionBlock(plain(head), nil, nil))
	if facts := display.FactLines(display.Details(infoOf(q).details)); len(facts) > 0 {
		blocks = append(blocks, slack.NewSectionBlock(plain(strings.Join(facts, "\n")), nil, nil))
	}
	where := "thread " + q.ThreadID + ", question " + q.ID
	var ctx []slack.MixedElement
	switch {
	case q.Status == checkpoint.QuestionPending && !q.Deadline.IsZero():
		ctx = append(ctx, slack.NewTextBlockObject(slack.MarkdownType,
			"Answer by "+slackDate(q.Deadline)+": then it times out and the call is blocked.", false, false))
	case q.Status != checkpoint.QuestionPending:
		at := q.ResolvedAt
		text := display.Resolution(q)
		if !at.IsZero() {
			text += " at "
		}
		elems := []slack.MixedElement{plain(text)}
		if !at.IsZero() {
			elems = append(elems, slack.NewTextBlockObject(slack.MarkdownType, slackDate(at), false, false))
		}
		ctx = append(ctx, elems...)
	}
	ctx = append(ctx, plain(where))
	blocks = append(blocks, slack.NewContextBlock("", ctx...))
	var buttons []slack.BlockElement
	if q.Status == checkpoint.QuestionPending && answerable(q) && len(n.cfg.Slack.Reviewers) > 0 {
		now := n.clk.Now()
		approve := slack.NewButtonBlockElement(slackApprove, n.actions.Sign(actionFor(q, "approve", "slack:"+channel, now)),
			plain("Approve")).WithStyle(slack.StylePrimary).WithConfirm(slack.NewConfirmationBlockObject(
			plain("Approve this call?"), plain(clip(summary, 280)), plain("Approve"), plain("Cancel")))
		deny := slack.NewButtonBlockElement(slackDeny, n.actions.Sign(actionFor(q, "deny", "slack:"+channel, now)),
			plain("Deny")).WithStyle(slack.StyleDanger)
		buttons = append(buttons, approve, deny)
	}
	if u := n.cfg.questionURL(q.ThreadID, q.ID); u != "" {
		buttons = append(buttons, slack.NewButtonBlockElement(slackOpen, "", plain("Open")).WithURL(u))
	}
	if len(buttons) > 0 {
		blocks = append(blocks, slack.NewActionBlock(blockID(q.ThreadID, q.ID), buttons...))
	}
	return blocks, clip(head, 2900)
}

// sendSlack posts, or updates, d's message.
func (n *Notifier) sendSlack(ctx context.Context, d *checkpoint.Delivery) (string, error) {
	q, err := n.store.GetQuestion(ctx, d.ThreadID, d.QuestionID)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return "", permanent(err)
	}
	if err != nil {
		return "", err
	}
	posted, err := n.postedTS(ctx, q, d.Target)
	if err != nil {
		return "", err
	}
	blocks, text := n.slackMessage(q, d.Target)
	opts := []slack.MsgOption{slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(text, false)}
	switch {
	case d.Event == QuestionResolved && posted == "":
		// Its message is not posted yet (its delivery waits to be
		// retried): this one waits too.
		return "", errors.New("the question's Slack message is not posted yet")
	case posted != "" && d.Event == DeadlineNear:
		_, ts, err := n.slack.PostMessageContext(ctx, d.Target, slack.MsgOptionTS(posted),
			slack.MsgOptionText(nearText(q), false))
		return ts, slackErr(err)
	case posted != "":
		_, _, _, err := n.slack.UpdateMessageContext(ctx, d.Target, posted, opts...)
		return posted, slackErr(err)
	}
	_, ts, err := n.slack.PostMessageContext(ctx, d.Target, opts...)
	if err != nil {
		return "", slackErr(err)
	}
	// Recorded for the update that comes with the answer, wherever it is
	// sent from. A failure here leaves the message unrecorded (not
	// updated later), not sent twice.
	ev := map[string]any{"question_id": q.ID, "channel": d.Target, "ts": ts, "delivery": d.ID}
	raw, _ := json.Marshal(ev)
	if _, err := n.store.AppendEvent(context.WithoutCancel(ctx), &checkpoint.Event{ThreadID: q.ThreadID, RunID: q.RunID,
		Type: eventPosted, Data: raw, At: n.clk.Now()}); err != nil {
		n.log.Warn("tollgate: a posted Slack message could not be recorded: it will not be updated when answered",
			"thread", q.ThreadID, "question", q.ID, "channel", d.Target, "err", err)
	}
	return ts, nil
}

func nearText(q *checkpoint.Question) string {
	if q.Status != checkpoint.QuestionPending {
		return "Answered meanwhile: " + display.Resolution(q)
	}
	if q.Deadline.IsZero() {
		return "Still waiting for an answer."
	}
	return "Still waiting: it times out " + slackDate(q.Deadline) + "."
}

// postedTS is the ts of q's message in channel, from the log ("" when
// none was posted).
func (n *Notifier) postedTS(ctx context.Context, q *checkpoint.Question, channel string) (string, error) {
	var after int64
	for {
		evs, err := n.store.ListEvents(ctx, q.ThreadID, after, 500)
		if err != nil {
			return "", err
		}
		for _, e := range evs {
			if e.Type != eventPosted {
				continue
			}
			var p struct {
				QuestionID string `json:"question_id"`
				Channel    string `json:"channel"`
				TS         string `json:"ts"`
			}
			if json.Unmarshal(e.Data, &p) == nil && p.QuestionID == q.ID && p.Channel == channel && p.TS != "" {
				return p.TS, nil
			}
		}
		if len(evs) < 500 {
			return "", nil
		}
		after = evs[len(evs)-1].Seq
	}
}

// slackErr marks Slack's refusals that no retry changes.
func slackErr(err error) error {
	if err == nil {
		return nil
	}
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return err
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "channel_not_found", "not_in_channel", "invalid_auth", "account_inactive", "token_revoked",
			"is_archived", "message_not_found", "cant_update_message", "invalid_blocks", "msg_too_long":
			return permanent(err)
		}
	}
	return err
}

// slackActions serves Slack's interactivity requests (the app's Request
// URL): a press of Approve or Deny answers only when Slack signed the
// request (v0, X-Slack-Request-Timestamp within five minutes) and the
// button's action is one this server signed for that very message's
// question, still pending, with the digest the message showed, pressed
// by a Slack user the configuration names; anything else is told so, with
// a link to the question on the page.
func (n *Notifier) slackActions(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	sv, err := slack.NewSecretsVerifier(r.Header, string(n.cfg.secrets["slack_signing"]))
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		n.log.Warn("tollgate: a Slack request without a valid signature was refused", "err", err)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	form, err := parseForm(body)
	if err != nil {
		http.Error(w, "bad payload", http.StatusBadRequest)
		return
	}
	var cb slack.InteractionCallback
	if err := json.Unmarshal([]byte(form), &cb); err != nil {
		http.Error(w, "bad payload", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusOK) // Slack wants its answer within 3 s; what follows is said through response_url
	if cb.Type != slack.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) == 0 {
		return
	}
	ba := cb.ActionCallback.BlockActions[0]
	if ba.ActionID != slackApprove && ba.ActionID != slackDeny {
		return // Open: Slack opened the page
	}
	msg, q := n.slackPress(r.Context(), &cb, ba)
	if msg != "" {
		if u := n.questionLink(q); u != "" {
			msg += " Open it on the page: " + u
		}
		n.reply(r.Context(), cb.ResponseURL, msg)
	}
}

// slackPress answers the question of a button press, or says why not.
func (n *Notifier) slackPress(ctx context.Context, cb *slack.InteractionCallback, ba *slack.BlockAction) (string, *Action) {
	act, err := n.actions.Verify(ba.Value, n.clk.Now())
	switch {
	case errors.Is(err, ErrActionExpired):
		return "This button has expired: the question's time is over.", act
	case err != nil:
		return "This button was not signed by this tollgate server: nothing was answered.", nil
	}
	wantDecision := map[string]string{slackApprove: "approve", slackDeny: "deny"}[ba.ActionID]
	if act.Decision != wantDecision || ba.BlockID != blockID(act.ThreadID, act.QuestionID) || act.For != "slack:"+cb.Channel.ID {
		n.log.Warn("tollgate: a Slack action that does not belong to its message was refused",
			"thread", act.ThreadID, "question", act.QuestionID, "user", cb.User.ID)
		return "This button does not belong to this message: nothing was answered.", act
	}
	name, ok := n.cfg.Slack.Reviewers[cb.User.ID]
	if !ok {
		return "You are not one of the reviewers who may answer from Slack.", act
	}
	q, refusal := n.answer(ctx, act, name+" (Slack)", "denied in Slack by "+name)
	if refusal != "" {
		return refusal, act
	}
	// The message says who answered at once; the resolved event's
	// delivery says it again (it is idempotent) for every channel.
	blocks, text := n.slackMessage(q, cb.Channel.ID)
	if _, _, _, err := n.slack.UpdateMessageContext(ctx, cb.Channel.ID, cb.Container.MessageTs,
		slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(text, false)); err != nil {
		n.log.Warn("tollgate: updating the Slack message after an answer", "err", err)
	}
	return "", act
}

// answer answers the question of a verified action, in who's name, or
// says to the presser why not (refusal).
func (n *Notifier) answer(ctx context.Context, act *Action, who, denyReason string) (q *checkpoint.Question, refusal string) {
	q, err := n.store.GetQuestion(ctx, act.ThreadID, act.QuestionID)
	if err != nil {
		return nil, "The question is gone: nothing was answered."
	}
	if q.Digest != act.Digest || !answerable(q) {
		return nil, "The call changed since this message was sent: nothing was answered."
	}
	if q.Status != checkpoint.QuestionPending {
		return nil, "Already " + display.Resolution(q) + ": nothing more was answered."
	}
	body, err := answerBody(q, act, denyReason)
	answerer := n.getAnswerer()
	if err != nil || answerer == nil {
		return nil, "This server takes no answers from notifications."
	}
	q, err = answerer.AnswerWith(ctx, act.ThreadID, act.QuestionID, body, host.AnswerOptions{By: who, RequireDigest: true})
	if err != nil {
		if cur, gerr := n.store.GetQuestion(ctx, act.ThreadID, act.QuestionID); gerr == nil && cur.Status != checkpoint.QuestionPending {
			return nil, "Already " + display.Resolution(cur) + ": nothing more was answered."
		}
		return nil, "The answer was refused: " + err.Error()
	}
	n.log.Info("tollgate: question answered from a notification", "thread", q.ThreadID, "question", q.ID, "by", who, "decision", act.Decision)
	return q, ""
}

func (n *Notifier) questionLink(act *Action) string {
	if act == nil {
		return n.cfg.BaseURL
	}
	return n.cfg.questionURL(act.ThreadID, act.QuestionID)
}

// reply says msg to the presser alone (an ephemeral message through the
// press's response_url, which must be Slack's: the same API host).
func (n *Notifier) reply(ctx context.Context, responseURL, msg string) {
	if responseURL == "" {
		return
	}
	if !strings.HasPrefix(responseURL, n.slackHooks) {
		n.log.Warn("tollgate: a Slack response_url outside Slack's hooks was not called", "url", responseURL)
		return
	}
	raw, _ := json.Marshal(&slack.WebhookMessage{Text: msg, ResponseType: slack.ResponseTypeEphemeral, ReplaceOriginal: false})
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, responseURL, bytes.NewReader(raw))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.http.Do(req)
	if err != nil {
		n.log.Warn("tollgate: replying to a Slack press", "err", err)
		return
	}
	resp.Body.Close()
}

// parseForm returns the payload field of an
// application/x-www-form-urlencoded body.
func parseForm(body []byte) (string, error) {
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return "", err
	}
	if p := v.Get("payload"); p != "" {
		return p, nil
	}
	return "", errors.New("no payload")
}
