//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/provider/scripted"
)

// turnMark is the cost of the steps around one turn of a long thread.
type turnMark struct {
	Turn int `json:"turn"`
	// Steps are the turns the figures are taken over: (Turn-Steps, Turn].
	Steps int `json:"steps"`
	// StepTime is the median time of those steps: from a tool call
	// starting to the next one starting (the tool's result stored, the
	// model called, its message and the next call's claim stored).
	StepTime time.Duration `json:"step_ns"`
	// Written is the mean bytes written per step (-1: not measured).
	Written float64 `json:"written_bytes"`
	// Content is the mean size of what a step adds to the thread: the
	// previous call's result message and the model's message with the
	// next call, as JSON.
	Content float64 `json:"content_bytes"`
}

type turnsResult struct {
	Store string `json:"store"`
	Turns int    `json:"turns"`
	// What bytes written means for this store.
	WrittenBy    string           `json:"written_by"`
	Total        time.Duration    `json:"total_ns"`
	ThreadBytes  int              `json:"thread_bytes"`
	TotalWritten int64            `json:"total_written_bytes"`
	FileGrowth   int64            `json:"file_growth_bytes,omitempty"`
	ByMethod     map[string]int64 `json:"by_method,omitempty"`
	Marks        []turnMark       `json:"marks"`
	ResultBytes  int              `json:"result_bytes"`
}

// turnMarks are the turns reported for a thread of t turns.
func turnMarks(t int) []int {
	var out []int
	for _, k := range []int{10, 100, 500, 1000} {
		if k <= t {
			out = append(out, k)
		}
	}
	if len(out) == 0 || out[len(out)-1] != t {
		out = append(out, t)
	}
	return out
}

func fileSize(paths ...string) int64 {
	var n int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// threadTurns runs one thread of t tool-call turns in one run: the model
// calls read (allowed by the policy), which returns resultBytes, t times,
// then answers.
func threadTurns(ctx context.Context, b *backend, t, resultBytes int, wrap bool) (*turnsResult, error) {
	raw, err := b.openStore(ctx, 4)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	store := raw
	var cs *countingStore
	if wrap {
		cs = newCountingStore(raw)
		store = cs
	}
	res := &turnsResult{Store: b.label, Turns: t, ResultBytes: resultBytes}
	written := res.writtenBy(ctx, b)
	marks := make([]turnStart, t+1) // marks[i]: the i-th call starting; marks[0]: the prompt
	calls := 0
	rng := rand.New(rand.NewPCG(1, 2))
	letters := []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ")
	read := agent.NewTool("read", "Read a file.", func(ctx context.Context, a readArgs) (string, error) {
		enter := time.Now()
		calls++
		w := written()
		if calls <= t {
			marks[calls] = turnStart{enter: enter, after: time.Now(), written: w}
		}
		out := make([]byte, resultBytes)
		for i := range out {
			out[i] = letters[rng.IntN(len(letters))]
		}
		return a.Path + "\n" + string(out), nil
	}, nil)
	ch := hitl.NewCheckpointedChannel(store, "", nil)
	thread := "turns-" + randomHex(4)
	a, err := agent.New(agent.Config{Provider: scripted.New(readTurns(t)...), Tools: []*agent.Tool{read}, Checkpointer: store, Channel: ch,
		ThreadID: thread, MaxTurns: t + 2, Logger: quiet,
		Middleware: []agent.Middleware{hitl.NewApprovalPolicyMiddleware(ch, benchPolicy)}})
	if err != nil {
		return nil, err
	}
	var files []string
	if b.kind == "sqlite" {
		files = []string{b.path, b.path + "-wal", b.path + "-shm"}
	}
	size0 := fileSize(files...)
	var before map[string]int64
	if cs != nil {
		before = cs.snapshot()
	}
	w0 := written()
	start := time.Now()
	marks[0] = turnStart{enter: start, after: start, written: w0}
	msg, err := a.Prompt(ctx, "Read every file of the project.")
	res.Total = time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("thread of %d turns: %w", t, err)
	}
	if msg == nil || calls != t {
		return nil, fmt.Errorf("thread of %d turns: the tool ran %d times", t, calls)
	}
	if w1 := written(); w0 >= 0 && w1 >= 0 {
		res.TotalWritten = w1 - w0
	} else {
		res.TotalWritten = -1
	}
	if files != nil {
		res.FileGrowth = fileSize(files...) - size0
	}
	if cs != nil {
		res.ByMethod = map[string]int64{}
		for k, v := range cs.snapshot() {
			if d := v - before[k]; d != 0 {
				res.ByMethod[k] = d
			}
		}
	}
	if err := res.setMarks(ctx, store, thread, marks); err != nil {
		return nil, err
	}
	return res, nil
}

// turnStart is the moment a call of the thread's tool started: when it
// was entered, after it read the bytes written so far, and those.
type turnStart struct {
	enter, after time.Time
	written      int64
}

// writtenBy says how the bytes written are counted on b, and returns
// the counter (-1: not measured).
func (res *turnsResult) writtenBy(ctx context.Context, b *backend) func() int64 {
	switch b.kind {
	case "sqlite":
		res.WrittenBy = "write(2)/pwrite(2) bytes of this process (/proc/self/io wchar): WAL and checkpoints"
		return writtenBytes
	case "postgres":
		res.WrittenBy = "WAL bytes of the server (pg_current_wal_insert_lsn difference)"
		return func() int64 { return b.walLSN(ctx) }
	default:
		res.WrittenBy = "not measured (memory)"
		return func() int64 { return -1 }
	}
}

// readTurns is the model's script: t turns that each call read, then an
// answer.
func readTurns(t int) []scripted.Turn {
	turns := make([]scripted.Turn, 0, t+1)
	for i := 1; i <= t; i++ {
		turns = append(turns, scripted.Turn{Text: "Reading the next file.",
			ToolCalls: []agent.ToolCall{scripted.Call(fmt.Sprintf("call_r%05d", i), "read", readArgs{Path: fmt.Sprintf("src/pkg%03d/file%05d.go", i%97, i)})}})
	}
	turns = append(turns, scripted.Turn{Text: "Read them all."})
	return turns
}

// setMarks sets the thread's size and its per-step figures at the turns
// of turnMarks, from the calls' starts (marks[0]: the prompt).
func (res *turnsResult) setMarks(ctx context.Context, store checkpoint.Store, thread string, marks []turnStart) error {
	t := len(marks) - 1
	th, err := store.LoadThread(ctx, thread)
	if err != nil {
		return err
	}
	res.ThreadBytes = len(th.Messages)
	var msgs []json.RawMessage
	if err := json.Unmarshal(th.Messages, &msgs); err != nil {
		return err
	}
	// msgs: the prompt, then per turn i the model's message (2i-1) and
	// the tool's result (2i), then the final answer. Step i (the call of
	// turn i-1 finishing to the call of turn i starting) adds the result
	// of turn i-1 and the model's message of turn i.
	if len(msgs) < 2*t+1 {
		return fmt.Errorf("thread of %d turns has %d messages", t, len(msgs))
	}
	content := func(i int) int {
		n := len(msgs[2*i-1])
		if i > 1 {
			n += len(msgs[2*(i-1)])
		} else {
			n += len(msgs[0])
		}
		return n
	}
	for _, k := range turnMarks(t) {
		w := min(10, max(1, k/2))
		var times []time.Duration
		var bytes, cont float64
		measured := true
		for i := k - w + 1; i <= k; i++ {
			times = append(times, marks[i].enter.Sub(marks[i-1].after))
			if marks[i].written < 0 || marks[i-1].written < 0 {
				measured = false
			}
			bytes += float64(marks[i].written - marks[i-1].written)
			cont += float64(content(i))
		}
		slices.Sort(times)
		m := turnMark{Turn: k, Steps: w, StepTime: medianDur(times), Written: bytes / float64(w), Content: cont / float64(w)}
		if !measured {
			m.Written = -1
		}
		res.Marks = append(res.Marks, m)
	}
	return nil
}
