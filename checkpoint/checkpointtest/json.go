package checkpointtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// jsonEdgeCases are valid JSON documents that every store keeps byte for
// byte: a reviewer approves exactly these bytes.
var jsonEdgeCases = map[string]string{
	"Unicode":         `{"emoji":"😀","cjk":"漢字","rtl":"עברית","combining":"é","separators":"  "}`,
	"EscapedUnicode":  `{"emoji":"\ud83d\ude00","accent":"\u00e9","lone":"\udc00","bom":"\ufeff"}`,
	"EscapedNUL":      `{"cmd":"printf 'a\u0000b'","ctl":"\u0001\u001f\b\f\n\r\t"}`,
	"Escapes":         `{"quote":"\"","backslash":"\\","slash":"\/","html":"<script>&amp;</script>"}`,
	"BigNumbers":      `{"big":123456789012345678901234567890,"int64":9223372036854775808,"precise":0.1000000000000000055511151231257827,"exp":1e400,"neg":-0,"small":1E-400}`,
	"Whitespace":      "{\n\t\"a\" :  1 ,\r\n  \"b\":[ 1 ,2 ] }",
	"DuplicateKeys":   `{"amount":1,"amount":1000000}`,
	"KeyOrder":        `{"z":1,"a":2,"m":{"y":1,"b":2}}`,
	"TopLevelArray":   `[1,"two",null,true,{"x":[]}]`,
	"TopLevelString":  `"just a string"`,
	"TopLevelNumber":  `42`,
	"TopLevelNull":    `null`,
	"EmptyObject":     `{}`,
	"DeepNesting":     strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200),
	"LargeDocument":   `{"blob":"` + strings.Repeat("abcdefghij", 50_000) + `"}`,
	"UnicodeKeys":     `{"ключ":"значение","🔑":"🚪"}`,
	"NonCanonicalNum": `{"a":1.0,"b":1e2,"c":0.000001,"d":100000000000000000000000}`,
}

func testJSON(t *testing.T, setup setupFunc) {
	// Every JSON field of every record, written and read back. (One store
	// for all the cases: each has threads of its own.)
	t.Run("EdgeCases", func(t *testing.T) {
		s := setup(t)
		for name, doc := range jsonEdgeCases {
			t.Run(name, func(t *testing.T) {
				raw := json.RawMessage(doc)
				if !json.Valid(raw) {
					t.Fatalf("test case %s is not valid JSON", name)
				}
				errs := roundTripJSON(t, s, raw)
				for _, err := range errs {
					t.Error(err)
				}
			})
		}
	})

	// Bytes that are not valid JSON in UTF-8 (which the store contract
	// does not allow): a store may refuse them (PostgreSQL does), but what
	// it accepts it keeps byte for byte.
	t.Run("InvalidKeptOrRefused", func(t *testing.T) {
		s := setup(t)
		for name, doc := range map[string]string{
			"RawNUL":      "{\"cmd\":\"a\x00b\"}",
			"InvalidUTF8": "{\"s\":\"\xff\xfe\"}",
			"NotJSON":     `{"unterminated":`,
		} {
			t.Run(name, func(t *testing.T) {
				// Refusals are fine; changes fail the test.
				for _, err := range roundTripJSON(t, s, json.RawMessage(doc)) {
					t.Logf("refused: %v", err)
				}
			})
		}
	})
}

// roundTripJSON writes raw into every JSON field a store keeps and reads
// each back; a write that fails is returned as an error, a value that comes
// back different fails the test.
func roundTripJSON(t *testing.T, s checkpoint.Store, raw json.RawMessage) []error {
	t.Helper()
	var errs []error
	thread := id("thread")

	// Thread messages: each message is kept byte for byte, created,
	// appended by Commit and saved.
	one := json.RawMessage("[" + string(raw) + "]")
	th := &checkpoint.Thread{ID: thread, Status: checkpoint.ThreadRunning, RunID: "run-1", Messages: one}
	if err := s.CreateThread(ctx(t), th); err != nil {
		errs = append(errs, fmt.Errorf("CreateThread: %w", err))
	} else {
		got, err := s.LoadThread(ctx(t), thread)
		if err != nil {
			t.Fatalf("LoadThread: %v", err)
		}
		checkJSON(t, "Thread.Messages", got.Messages, one)
		w := &checkpoint.ThreadWrite{ID: thread, Version: got.Version, Status: got.Status, RunID: got.RunID, Append: []json.RawMessage{raw}}
		if _, err := s.Commit(ctx(t), &checkpoint.Batch{Thread: w}); err != nil {
			errs = append(errs, fmt.Errorf("commit (append): %w", err))
		} else if got, err = s.LoadThread(ctx(t), thread); err != nil {
			t.Fatalf("LoadThread: %v", err)
		} else {
			checkJSON(t, "Thread.Messages (appended)", got.Messages, json.RawMessage("["+string(raw)+","+string(raw)+"]"))
		}
		got.Messages = one
		if err := s.SaveThread(ctx(t), got); err != nil {
			errs = append(errs, fmt.Errorf("SaveThread: %w", err))
		} else if got, err := s.LoadThread(ctx(t), thread); err != nil {
			t.Fatalf("LoadThread: %v", err)
		} else {
			checkJSON(t, "Thread.Messages (saved)", got.Messages, one)
		}
	}

	for _, tc := range []*checkpoint.ToolCall{
		{ThreadID: thread, RunID: "run-1", CallID: "executing", Tool: "bash", Args: raw, State: checkpoint.ToolCallExecuting},
		{ThreadID: thread, RunID: "run-1", CallID: "done", Tool: "bash", Args: raw, State: checkpoint.ToolCallDone, Result: raw},
	} {
		if err := s.PutToolCall(ctx(t), tc); err != nil {
			errs = append(errs, fmt.Errorf("PutToolCall(%s): %w", tc.State, err))
		}
	}
	calls, err := s.ListToolCalls(ctx(t), thread, "run-1")
	if err != nil {
		t.Fatalf("ListToolCalls: %v", err)
	}
	for _, c := range calls {
		checkJSON(t, "ToolCall.Args", c.Args, raw)
		if c.State == checkpoint.ToolCallDone {
			checkJSON(t, "ToolCall.Result", c.Result, raw)
		}
	}

	q := newQuestion(thread, "q")
	q.Payload = raw
	if stored, _, err := s.CreateQuestion(ctx(t), q); err != nil {
		errs = append(errs, fmt.Errorf("CreateQuestion: %w", err))
	} else {
		checkJSON(t, "Question.Payload (returned)", stored.Payload, raw)
		checkJSON(t, "Question.Payload", mustGetQuestion(t, s, thread, q.ID).Payload, raw)
		r := answer("alice", t0)
		r.Answer = raw
		if got, err := s.ResolveQuestion(ctx(t), thread, q.ID, r); err != nil {
			errs = append(errs, fmt.Errorf("ResolveQuestion: %w", err))
			if got := mustGetQuestion(t, s, thread, q.ID); got.Status != checkpoint.QuestionPending {
				t.Errorf("ResolveQuestion refused (%v), yet the question is %s", err, got.Status)
			}
		} else {
			checkJSON(t, "Question.Answer (returned)", got.Answer, raw)
			got := mustGetQuestion(t, s, thread, q.ID)
			checkJSON(t, "Question.Answer", got.Answer, raw)
			checkJSON(t, "Question.Payload (answered)", got.Payload, raw)
			listed, _, err := s.ListQuestions(ctx(t), checkpoint.QuestionFilter{ThreadID: thread})
			if err != nil || len(listed) != 1 {
				t.Fatalf("ListQuestions = %d, %v", len(listed), err)
			}
			checkJSON(t, "Question.Answer (listed)", listed[0].Answer, raw)
		}
	}

	if _, err := s.AppendEvent(ctx(t), &checkpoint.Event{ThreadID: thread, RunID: "run-1", Type: "x", Data: raw}); err != nil {
		errs = append(errs, fmt.Errorf("AppendEvent: %w", err))
	}
	evs, err := s.ListEvents(ctx(t), thread, 0, 0)
	if err != nil {
		t.Fatalf("ListEvents: %v", err)
	}
	for _, e := range evs {
		if e.Type == "x" { // not the resolution's question_resolved
			checkJSON(t, "Event.Data", e.Data, raw)
		}
	}
	return errs
}
