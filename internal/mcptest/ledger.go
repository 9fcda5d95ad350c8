package mcptest

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Call is one tool call that took effect on a test server.
type Call struct {
	// Tool is the tool's name.
	Tool string `json:"tool"`
	// Args are the call's arguments as the server received them (decoded
	// from JSON, so numbers are float64).
	Args map[string]any `json:"args"`
	// At is when the call took effect.
	At time.Time `json:"at"`
}

// Ledger records the tool calls that took effect on a test server. It is safe
// for concurrent use; its zero value is an empty ledger, and a nil *Ledger
// records nothing.
//
// The tools that change something (write_note, delete_repo, slow, bad_schema,
// and the stdio program's crash) record their call when they take effect,
// before they return; a slow call cut short by its context is not recorded.
// The read-only tools (echo, structured, fail) and hang record nothing.
type Ledger struct {
	mu      sync.Mutex
	calls   []Call
	hanging int
	file    *os.File // if set, each call is also appended to it as a JSON line
}

// OpenLedgerFile returns an empty Ledger that also appends each call it
// records to the file at path, one JSON-encoded [Call] a line, synced to disk
// before the call returns. The stdio server program records into one; read
// the file with [ReadLedger].
func OpenLedgerFile(path string) (*Ledger, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &Ledger{file: f}, nil
}

// Record records a call of tool with args, now. It fails only if the ledger's
// file (see [OpenLedgerFile]) cannot be written; the call is recorded in
// memory even so.
func (l *Ledger) Record(tool string, args map[string]any) error {
	if l == nil {
		return nil
	}
	c := Call{Tool: tool, Args: args, At: time.Now()}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
	if l.file == nil {
		return nil
	}
	line, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	if _, err := l.file.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	if err := l.file.Sync(); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	return nil
}

// Calls returns the calls recorded so far, oldest first.
func (l *Ledger) Calls() []Call {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Call(nil), l.calls...)
}

// Count returns how many calls of tool were recorded.
func (l *Ledger) Count(tool string) int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls {
		if c.Tool == tool {
			n++
		}
	}
	return n
}

// Hanging returns how many calls of the in-process hang tool are blocked
// right now, so a test can wait until a call has reached the server before
// it cancels the call, and check that the call ended afterwards.
func (l *Ledger) Hanging() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hanging
}

func (l *Ledger) addHanging(d int) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hanging += d
}
