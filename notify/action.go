package notify

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/internal/qkind"
)

// Action is what a Slack button or a mail link may do: answer one
// question, bound to the digest of the call it showed, until the
// question's deadline. The server signs it (HMAC-SHA256 with the action
// secret) when the message is sent, and answers only with an action it
// signed: the agent, which can neither read the secret nor reach Slack or
// the mail, cannot make one. Single use: the answer is the question's
// compare-and-set, which only the first answer wins.
type Action struct {
	ThreadID   string `json:"t"`
	QuestionID string `json:"q"`
	Digest     string `json:"d"`
	// Decision is "approve" or "deny".
	Decision string `json:"a"`
	// Expires is the question's deadline (Unix seconds); zero: a day
	// after it was made.
	Expires int64 `json:"x"`
	// For is whom the message went to ("email:alice@example.com",
	// "slack:C0INFRA"): a mail link answers in that address's name.
	For   string `json:"f"`
	Nonce string `json:"n"`
}

// Errors of [Actions.Verify], for [errors.Is].
var (
	ErrActionForged  = errors.New("notify: the action is not one this server signed")
	ErrActionExpired = errors.New("notify: the action has expired")
)

// Actions signs and verifies actions with one key.
type Actions struct {
	key []byte
}

// NewActions returns actions signed with key (nil: a new random key, for
// one process: actions it signed are refused after a restart).
func NewActions(key []byte) *Actions {
	if key == nil {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	return &Actions{key: key}
}

const actionDomain = "tollgate-action-v1."

// Sign returns the action as a token: its JSON and its MAC, in base64url.
func (a *Actions) Sign(act Action) string {
	if act.Nonce == "" {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		act.Nonce = base64.RawURLEncoding.EncodeToString(b)
	}
	raw, _ := json.Marshal(act)
	body := base64.RawURLEncoding.EncodeToString(raw)
	return body + "." + base64.RawURLEncoding.EncodeToString(a.mac(body))
}

func (a *Actions) mac(body string) []byte {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(actionDomain + body))
	return m.Sum(nil)
}

// Verify returns the action of token when this key signed it and it has
// not expired at now.
func (a *Actions) Verify(token string, now time.Time) (*Action, error) {
	body, sig, ok := strings.Cut(token, ".")
	if !ok || len(token) > 4096 {
		return nil, ErrActionForged
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, a.mac(body)) {
		return nil, ErrActionForged
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return nil, ErrActionForged
	}
	var act Action
	if err := json.Unmarshal(raw, &act); err != nil {
		return nil, ErrActionForged
	}
	if !now.Before(time.Unix(act.Expires, 0)) {
		return nil, ErrActionExpired
	}
	return &act, nil
}

// actionFor is the action that answers q with decision, for whom.
func actionFor(q *checkpoint.Question, decision, whom string, now time.Time) Action {
	exp := q.Deadline
	if exp.IsZero() {
		exp = now.Add(24 * time.Hour)
	}
	// Rounded up: the action lives as long as the question, not longer
	// than a second past it (the answer is refused after the deadline).
	return Action{ThreadID: q.ThreadID, QuestionID: q.ID, Digest: q.Digest, Decision: decision,
		Expires: exp.Add(time.Second - 1).Unix(), For: whom}
}

// answerable reports whether a question can be answered by an action: an
// approval of a tool call, bound to its digest.
func answerable(q *checkpoint.Question) bool {
	return q.Digest != "" && qkind.Of(q.Kind).Approval
}

// answerBody is the answer an action gives q, in the shape of its kind.
func answerBody(q *checkpoint.Question, act *Action, reason string) ([]byte, error) {
	decision := hitl.DecisionDeny
	if act.Decision == hitl.DecisionApprove {
		decision = hitl.DecisionApprove
	}
	return json.Marshal(qkind.Approval(q.Kind, decision, reason, nil, act.Digest))
}
