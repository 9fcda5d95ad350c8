package postgres

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// A batch's messages and events go to the server as rows of parameters:
// up to maxValues rows as a VALUES list of scalar parameters, more as one
// array a column, unnested. An array parameter costs the server ~15 µs
// to take in (more than inserting a row): five of them made an event's
// INSERT twice a plain one, and a step writes one or two messages and
// events.
const maxValues = 8

// column is a column of such rows: its name and type.
type column struct{ name, typ string }

var (
	messageColumns = []column{{"body", "text"}}
	eventColumns   = []column{{"thread_id", "text"}, {"run_id", "text"}, {"type", "text"}, {"data", "text"}, {"at", "timestamptz"}}
)

// rowsFrom is a FROM item "AS b" of n rows, columns n (0, 1, ...) and
// cols, from the parameters numbered from first on: n*len(cols) of them
// in row order (see rowArgs) up to maxValues rows, one array a column
// beyond.
func rowsFrom(n, first int, cols []column) string {
	var sb strings.Builder
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	if n > maxValues {
		sb.WriteString("(SELECT u.n - 1 AS n, ")
		sb.WriteString(strings.Join(names, ", "))
		sb.WriteString(" FROM unnest(")
		for i, c := range cols {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("$" + strconv.Itoa(first+i) + "::" + c.typ + "[]")
		}
		sb.WriteString(") WITH ORDINALITY AS u(" + strings.Join(names, ", ") + ", n)) AS b")
		return sb.String()
	}
	sb.WriteString("(VALUES ")
	p := first
	for r := range n {
		if r > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(" + strconv.Itoa(r))
		for _, c := range cols {
			sb.WriteString(", $" + strconv.Itoa(p) + "::" + c.typ)
			p++
		}
		sb.WriteString(")")
	}
	sb.WriteString(") AS b(n, " + strings.Join(names, ", ") + ")")
	return sb.String()
}

// rowArgs are the parameters of rowsFrom for rows, each the values of
// cols in order: row by row, or one slice a column beyond maxValues.
func rowArgs(rows [][]any, cols []column) []any {
	if len(rows) <= maxValues {
		out := make([]any, 0, len(rows)*len(cols))
		for _, r := range rows {
			out = append(out, r...)
		}
		return out
	}
	out := make([]any, len(cols))
	for i, c := range cols {
		switch c.typ {
		case "timestamptz":
			a := make([]time.Time, len(rows))
			for j, r := range rows {
				a[j] = r[i].(time.Time)
			}
			out[i] = a
		default:
			a := make([]*string, len(rows))
			for j, r := range rows {
				switch v := r[i].(type) {
				case string:
					a[j] = &v
				case []byte: // encJSON's
					s := string(v)
					a[j] = &s
				}
			}
			out[i] = a
		}
	}
	return out
}

// statements caches the statements built for a number of rows.
type statements struct {
	build func(n int) string
	mu    sync.Mutex
	byN   map[int]string
}

func newStatements(build func(n int) string) *statements {
	return &statements{build: build, byN: map[int]string{}}
}

// sql is the statement for n rows; all beyond maxValues are one.
func (st *statements) sql(n int) string {
	n = min(n, maxValues+1)
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.byN[n]
	if !ok {
		s = st.build(n)
		st.byN[n] = s
	}
	return s
}
