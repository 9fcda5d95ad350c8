package migrationtest

import (
	"encoding/json"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// MessageCase is a thread written when a thread's messages were one JSON
// array in one column: the column as it was, and the Messages LoadThread
// must return once the migration has moved them into one row per message.
// Each message keeps its bytes; only the spacing between messages (which
// the agent never wrote) is not kept.
type MessageCase struct {
	ID     string
	Stored string // the old column; "" for NULL
	Want   string
}

// MessageCases cover what the agent wrote (compact, unescaped <>&, raw
// non-ASCII) and what a caller of SaveThread could have written.
var MessageCases = []MessageCase{
	{"empty", `[]`, `[]`},
	{"null", ``, `[]`},
	{"agent", `[{"role":"user","text":"a <b> & c","run_id":"run_1"},{"role":"assistant","tool_calls":[{"id":"c1","name":"bash","arguments":{"cmd":"ls -l"}}],"run_id":"run_1"}]`,
		`[{"role":"user","text":"a <b> & c","run_id":"run_1"},{"role":"assistant","tool_calls":[{"id":"c1","name":"bash","arguments":{"cmd":"ls -l"}}],"run_id":"run_1"}]`},
	{"escapes", `[{"text":"caf\u00e9 \"q\" \\ \n \u0000 \ud83d\ude00"},"plain"]`, `[{"text":"caf\u00e9 \"q\" \\ \n \u0000 \ud83d\ude00"},"plain"]`},
	{"unicode", `[{"text":"日本語 ünï 😀 \u2028"}]`, `[{"text":"日本語 ünï 😀 \u2028"}]`},
	{"numbers", `[{"n":12345678901234567890123,"f":1.50,"e":1E+400}]`, `[{"n":12345678901234567890123,"f":1.50,"e":1E+400}]`},
	{"spacing", "[ {\"a\" : 1 ,\n \"b\":[ 1 , 2 ]} ,\n\t{\"c\":{}} ]", "[{\"a\" : 1 ,\n \"b\":[ 1 , 2 ]},{\"c\":{}}]"},
	{"nested", `[[1,[2,[3]]],{"x":[{"y":null}]},true,null,"s"]`, `[[1,[2,[3]]],{"x":[{"y":null}]},true,null,"s"]`},
	{"duplicate-keys", `[{"a":1,"a":2}]`, `[{"a":1,"a":2}]`},
}

// CheckMessages loads each case's thread (its id is the case's) from s
// after the migration: its Messages are the case's Want, and a message
// appended after the migration comes after the migrated ones.
func CheckMessages(t *testing.T, s checkpoint.Store, cases []MessageCase) {
	t.Helper()
	ctx := t.Context()
	for _, c := range cases {
		th, err := s.LoadThread(ctx, c.ID)
		if err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		if string(th.Messages) != c.Want {
			t.Errorf("%s: Messages after the migration = %s, want %s", c.ID, th.Messages, c.Want)
			continue
		}
		w := &checkpoint.ThreadWrite{ID: c.ID, Version: th.Version, Status: th.Status, RunID: th.RunID,
			Append: []json.RawMessage{json.RawMessage(`{"after":"migration"}`)}}
		if _, err := s.Commit(ctx, &checkpoint.Batch{Thread: w}); err != nil {
			t.Fatalf("%s: appending after the migration: %v", c.ID, err)
		}
		th, err = s.LoadThread(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := c.Want[:len(c.Want)-1]
		if want != "[" {
			want += ","
		}
		want += `{"after":"migration"}]`
		if string(th.Messages) != want {
			t.Errorf("%s: Messages after an append = %s, want %s", c.ID, th.Messages, want)
		}
	}
}
