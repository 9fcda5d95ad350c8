package mcpgate

import (
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// explain adds the end of what a stdio server wrote on stderr: why it
// did not start is usually there. And a URL's query (it may hold a key)
// is cut from what the SDK's errors repeat.
func (u *Upstream) explain(err error) error {
	err = u.redact(err)
	if s := u.stderr.String(); s != "" {
		return fmt.Errorf("%w%s%s", err, stderrMark, s)
	}
	return err
}

const stderrMark = "; it wrote on stderr: "

// scrubbed is an error with a message fit for an MCP client or a thread:
// no URL query, no command line, no stderr (those go to the log and to
// start-up errors, for the operator). It wraps the original.
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }

func (e *scrubbed) Unwrap() error { return e.err }

func (u *Upstream) redact(err error) error {
	if err == nil {
		return err
	}
	msg := err.Error()
	// Every URL in the message, as Go's errors print it (re-encoded, a
	// password as ***, a redirect's target too), loses user and query.
	out := urlInText.ReplaceAllStringFunc(msg, func(s string) string {
		v, perr := url.Parse(strings.TrimRight(s, `".,;:)`))
		if perr != nil {
			return "(a URL)"
		}
		tail := s[len(strings.TrimRight(s, `".,;:)`)):]
		v.User, v.RawQuery, v.Fragment = nil, "", ""
		return v.String() + tail
	})
	if out == msg {
		return err
	}
	return &scrubbed{msg: out, err: err}
}

var urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"']+`)

// public is err as a client may read it.
func (u *Upstream) public(err error) error {
	if err == nil {
		return nil
	}
	msg := u.redact(err).Error()
	if i := strings.Index(msg, stderrMark); i >= 0 {
		msg = msg[:i] + " (its stderr is in tollgate's log)"
	}
	msg = strings.ReplaceAll(msg, u.cfg.describe(), u.cfg.Name)
	return &scrubbed{msg: msg, err: err}
}

// tail keeps the last bytes a server wrote on stderr, for error messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func newTail(n int) *tail { return &tail{max: n} }

func (t *tail) Write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
}

func (t *tail) reset() {
	t.mu.Lock()
	t.buf = nil
	t.mu.Unlock()
}

// String is the last few lines, on one line.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.TrimSpace(strings.Join(lines, " | "))
}

// logWriter logs a stdio server's stderr, line by line, at debug, and
// keeps its tail.
type logWriter struct {
	tail *tail
	log  *slog.Logger
	mu   sync.Mutex
	line []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.tail.Write(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.line = append(w.line, p...)
	for {
		i := slices.Index(w.line, '\n')
		if i < 0 {
			break
		}
		w.log.Debug("tollgate: MCP server stderr", "line", string(w.line[:i]))
		w.line = w.line[i+1:]
	}
	if len(w.line) > 4096 {
		w.line = w.line[:0]
	}
	return len(p), nil
}
