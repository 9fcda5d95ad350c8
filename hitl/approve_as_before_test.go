package hitl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// oldParseApprove is parseApprove as it was before 78f6df3 (the decoder only).
func oldParseApprove(raw json.RawMessage) (*ApproveAnswer, error) {
	var a ApproveAnswer
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("%w: an approve question takes {\"decision\": \"approve\"|\"deny\"|\"edit\", \"reason\", \"edited_args\", \"digest\"}: %v", ErrWrongKind, err)
	}
	if err := checkApprove(&a); err != nil {
		return nil, err
	}
	return &a, nil
}

// oldCheckApprove is checkAnswer for an approve question before 78f6df3
// (no fast path, parseApprove by the decoder), edits with no schema.
func oldCheckApprove(q *checkpoint.Question, answer any) (json.RawMessage, error) {
	raw, err := toJSON(answer)
	if err != nil {
		return nil, fmt.Errorf("%w: answer cannot be encoded: %v", ErrWrongKind, err)
	}
	if err := duplicateKeys(raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWrongKind, err)
	}
	if raw, err = canonicalJSON(raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWrongKind, err)
	}
	a, err := oldParseApprove(raw)
	if err != nil {
		return nil, err
	}
	if a.Digest != "" && a.Digest != q.Digest {
		return nil, fmt.Errorf("%w (answer %s, question %s)", ErrDigestMismatch, a.Digest, q.Digest)
	}
	return canonicalJSON(mustJSON(a))
}

func checkAsOld(t *testing.T, raw []byte) {
	t.Helper()
	q := &checkpoint.Question{Kind: KindApprove, Digest: "sha256:abc"}
	got, gerr := checkAnswer(q, json.RawMessage(raw))
	want, werr := oldCheckApprove(q, json.RawMessage(raw))
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() || !bytes.Equal(got, want) {
		t.Errorf("checkAnswer(%q) = %s, %v; before = %s, %v", raw, got, gerr, want, werr)
	}
	// A stored answer as the policy reads it (any bytes a store holds).
	pa, perr := parseApprove(raw)
	oa, oerr := oldParseApprove(raw)
	if (perr == nil) != (oerr == nil) || perr != nil && perr.Error() != oerr.Error() ||
		pa != nil && oa != nil && (pa.Decision != oa.Decision || pa.Reason != oa.Reason || pa.Digest != oa.Digest || (pa.EditedArgs == nil) != (oa.EditedArgs == nil)) {
		t.Errorf("parseApprove(%q) = %+v, %v; before = %+v, %v", raw, pa, perr, oa, oerr)
	}
}

var answersAsBefore = []string{
	`{"decision":"approve"}`, `{"decision":"approve","digest":"sha256:abc"}`, `{"decision":"approve"} x`,
	`{"decision":"approve"}{"decision":"deny"}`, `{"decisio\u006e":"approve"}`, `{"Decision":"approve"}`,
	`{"decision":"deny","Decision":"approve"}`, `{"decision":"approve","DIGEST":"sha256:other"}`,
	`{"decision":"approve","decision":"deny"}`, `{"decision":"approve","reason":null}`, `{}`, `[]`, `"approve"`,
	"\xef\xbb\xbf{\"decision\":\"approve\"}", `{"decision":"approve","edited_args":null}`, `{"decision":"approve","edited_args":{}}`,
	`{"decision":"approve","reason":"a\u0000b"}`, "{\"decision\":\"approve\",\"reason\":\"\u2028<&>\x7f\"}",
	`{"decision":"approve","digest":"sha256:ab\u0063"}`, `{"decision":"approve","extra":1}`, ` {"decision" : "deny" } `,
}

func TestApproveAsBefore(t *testing.T) {
	for _, c := range answersAsBefore {
		checkAsOld(t, []byte(c))
	}
}

func FuzzApproveAsBefore(f *testing.F) {
	for _, c := range answersAsBefore {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkAsOld(t, raw) })
}

// A nil *ApproveAnswer is refused, not a panic (plainApprove hands it to
// the general path, whose toJSON dereferences it).
func TestCheckAnswerNilApprovePointer(t *testing.T) {
	q := &checkpoint.Question{Kind: KindApprove, Digest: "sha256:abc"}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("checkAnswer((*ApproveAnswer)(nil)) panicked: %v", r)
		}
	}()
	if _, err := checkAnswer(q, (*ApproveAnswer)(nil)); err == nil {
		t.Fatal("a nil answer accepted")
	}
}

// An ApproveAnswer given as a value or pointer: checkAnswer gives what it
// gave before the fast path.
func FuzzApproveStructAsBefore(f *testing.F) {
	f.Add("approve", "", "sha256:abc")
	f.Add("deny", "no <rm> & \u2028 \xff", "")
	f.Fuzz(func(t *testing.T, decision, reason, digest string) {
		q := &checkpoint.Question{Kind: KindApprove, Digest: "sha256:abc"}
		for _, answer := range []any{ApproveAnswer{Decision: decision, Reason: reason, Digest: digest},
			&ApproveAnswer{Decision: decision, Reason: reason, Digest: digest}} {
			got, gerr := checkAnswer(q, answer)
			want, werr := oldCheckApprove(q, answer)
			if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() || !bytes.Equal(got, want) {
				t.Errorf("checkAnswer(%#v) = %s, %v; before = %s, %v", answer, got, gerr, want, werr)
			}
		}
	})
}
