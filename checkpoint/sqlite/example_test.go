package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

// A question is written before anyone is asked; the first answer wins and
// every later one gets ErrConflict. Use a file path instead of ":memory:"
// for a store that survives the process.
func Example() {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, ":memory:", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	q, created, err := store.CreateQuestion(ctx, &checkpoint.Question{
		ThreadID: "thread-1",
		ID:       "approve_call-1",
		Kind:     "approve",
		Payload:  json.RawMessage(`{"tool":"bash","args":{"cmd":"rm -rf build"}}`),
		Deadline: time.Now().Add(time.Hour),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(q.ID, q.Status, created)

	// Resuming after a restart finds the same question instead of asking twice.
	_, created, _ = store.CreateQuestion(ctx, &checkpoint.Question{ThreadID: "thread-1", ID: "approve_call-1"})
	fmt.Println("created again:", created)

	answered, err := store.ResolveQuestion(ctx, "thread-1", "approve_call-1", checkpoint.Resolution{
		Status: checkpoint.QuestionAnswered,
		Answer: json.RawMessage(`{"decision":"approve"}`),
		By:     "alice",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(answered.Status, "by", answered.AnsweredBy)

	_, err = store.ResolveQuestion(ctx, "thread-1", "approve_call-1", checkpoint.Resolution{
		Status: checkpoint.QuestionAnswered,
		Answer: json.RawMessage(`{"decision":"deny"}`),
		By:     "bob",
	})
	fmt.Println("second answer refused:", errors.Is(err, checkpoint.ErrConflict))
	// Output:
	// approve_call-1 pending true
	// created again: false
	// answered by alice
	// second answer refused: true
}
