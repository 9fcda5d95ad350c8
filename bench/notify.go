//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
	"github.com/tollgate-ai/tollgate/notify"
)

// notifyCommand measures a question's notification: from the commit of
// the question (with its question_asked event) to its webhook's arrival
// at a receiver on this machine, through the notifier (the host's outbox:
// the log read after the store's notification, the deliveries written
// with the cursor, the signed POST, the delivery recorded), beside the
// same signed POST made directly.
func notifyCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("notify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	store := fs.String("store", "sqlite", "`store`: memory or sqlite (a temporary file)")
	n := fs.Int("n", 500, "questions (and direct POSTs) measured, one at a time")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./bench notify [-store memory|sqlite] [-n N]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	var mu sync.Mutex
	arrived := map[string]chan time.Time{}
	wait := func(id string) chan time.Time {
		mu.Lock()
		defer mu.Unlock()
		if arrived[id] == nil {
			arrived[id] = make(chan time.Time, 1)
		}
		return arrived[id]
	}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		if err := notify.Verify(secret, r.Header, body); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var p notify.Payload
		_ = json.Unmarshal(body, &p)
		select {
		case wait(p.Data.QuestionID) <- at:
		default:
		}
	}))
	defer rcv.Close()
	cfg, err := notify.Parse("bench.yaml", []byte("default: [b]\ngroups: {b: {webhooks: [{url: \""+rcv.URL+"\", secret_env: S}]}}\n"),
		func(string) string { return secret })
	if err != nil {
		return err
	}
	var st checkpoint.Store
	switch *store {
	case "memory":
		st = memory.New()
	case "sqlite":
		dir, err := os.MkdirTemp("", "bench-notify-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if st, err = sqlite.Open(ctx, filepath.Join(dir, "t.db"), nil); err != nil {
			return err
		}
	default:
		return fmt.Errorf("-store %q: want memory or sqlite", *store)
	}
	defer st.Close()
	nt, err := notify.New(notify.Options{Config: cfg, Store: st})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = nt.Run(rctx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // the notifier's first read of the log

	var viaNotifier, direct []time.Duration
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range *n {
		id := "q" + strconv.Itoa(i)
		ch := wait(id)
		t0 := time.Now()
		payload, _ := json.Marshal(map[string]any{"kind": "approve", "tool_name": "bash", "args": map[string]any{"cmd": "touch " + id}})
		ev, _ := json.Marshal(map[string]any{"question_id": id, "kind": "approve"})
		if _, err := st.Commit(ctx, &checkpoint.Batch{
			Question: &checkpoint.Question{ThreadID: "bench", ID: id, RunID: "r", CallID: id, Tool: "bash", Kind: "approve", Payload: payload, Digest: "d" + id, Deadline: t0.Add(time.Hour)},
			Events:   []*checkpoint.Event{{ThreadID: "bench", RunID: "r", Type: "question_asked", Data: ev}},
		}); err != nil {
			return err
		}
		select {
		case at := <-ch:
			viaNotifier = append(viaNotifier, at.Sub(t0))
		case <-time.After(10 * time.Second):
			return fmt.Errorf("question %s: no webhook within 10 s", id)
		case <-ctx.Done():
			return ctx.Err()
		}
		// The same, signed and posted directly.
		did := "d" + id
		dch := wait(did)
		body, _ := json.Marshal(notify.Payload{Type: notify.QuestionCreated, Timestamp: time.Now(), Data: notify.Data{ThreadID: "bench", QuestionID: did}})
		t1 := time.Now()
		h, err := notify.Sign(secret, "msg_"+did, t1, body)
		if err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, rcv.URL, bytes.NewReader(body))
		req.Header = h
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		direct = append(direct, (<-dch).Sub(t1))
	}
	fmt.Fprintf(stdout, "store %s, %d questions one at a time: commit to webhook received\n", *store, *n)
	fmt.Fprintf(stdout, "  %-28s p50 %8s  p99 %8s  max %8s\n", "through the notifier", pct(viaNotifier, 50).Round(time.Microsecond),
		pct(viaNotifier, 99).Round(time.Microsecond), pct(viaNotifier, 100).Round(time.Microsecond))
	fmt.Fprintf(stdout, "  %-28s p50 %8s  p99 %8s  max %8s\n", "a direct signed POST", pct(direct, 50).Round(time.Microsecond),
		pct(direct, 99).Round(time.Microsecond), pct(direct, 100).Round(time.Microsecond))
	return nil
}
