package sqlite_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

// schema11File makes a file of schema 11 at path, with rows.
func schema11File(t *testing.T, path, rows string) {
	t.Helper()
	oldSchemaFile(t, path, rows, schema11...)
}

// dumpRowTables is every row of threads, messages and tool_calls, each
// value with its type and bytes, in a fixed order.
func dumpRowTables(t *testing.T, db *sql.DB) string {
	t.Helper()
	return dumpQueries(t, db,
		`SELECT typeof(id)||':'||hex(id), version, status, run_id, created_at, updated_at, message_count, message_bytes, typeof(messages)||':'||hex(messages) FROM threads ORDER BY hex(id)`,
		`SELECT hex(thread_id), position, hex(body) FROM messages ORDER BY hex(thread_id), position`,
		`SELECT hex(thread_id), hex(run_id), hex(call_id), hex(tool), typeof(args)||':'||hex(args), state, typeof(result)||':'||hex(result), updated_at FROM tool_calls ORDER BY 1, 2, 3`)
}

// dumpQueries is the rows of each query, every value as it comes, each
// query's rows followed by "--".
func dumpQueries(t *testing.T, db *sql.DB, queries ...string) string {
	t.Helper()
	var out strings.Builder
	for _, q := range queries {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&out, vals...)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		out.WriteString("--\n")
	}
	return out.String()
}

// Every value schema 11 held in the three tables schema 12 lays out again
// is there after the migration, byte for byte: ids and bodies that are not
// UTF-8, that hold NULs. (A NULL thread id, which a rowid table's PRIMARY
// KEY would let in and WITHOUT ROWID refuse, schema 11 refused already:
// STRICT makes a PRIMARY KEY NOT NULL.)
func TestMigrateRowLayoutKeepsEveryValue(t *testing.T) {
	for name, rows := range map[string]string{
		"hostile bytes": `
INSERT INTO threads (id, version, status, run_id, created_at, updated_at, messages, message_count, message_bytes) VALUES
	(CAST(x'41ff0042' AS TEXT), 2, 'idle', CAST(x'00' AS TEXT), 1, 2, NULL, 2, 6),
	('', 1, 'idle', '', 0, 0, CAST(x'5b2200ff225d' AS TEXT), 0, 0);
INSERT INTO messages (thread_id, position, body) VALUES
	(CAST(x'41ff0042' AS TEXT), 0, CAST(x'2200ff22' AS TEXT)), (CAST(x'41ff0042' AS TEXT), 1, '""');
INSERT INTO tool_calls (thread_id, run_id, call_id, tool, args, state, result, updated_at) VALUES
	(CAST(x'41ff0042' AS TEXT), CAST(x'00' AS TEXT), CAST(x'c0' AS TEXT), 'bash', CAST(x'7b00' AS TEXT), 'done', '', 7);`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tollgate.db")
			schema11File(t, path, rows)
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			before := dumpRowTables(t, db)
			db.Close()

			s, err := sqlite.Open(t.Context(), path, nil)
			if err != nil {
				t.Fatalf("open of a schema-11 file:\n%s\n%v", before, err)
			}
			defer s.Close()
			db, err = sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if after := dumpRowTables(t, db); after != before {
				t.Errorf("after the migration:\n%s\nbefore:\n%s", after, before)
			}
		})
	}
}
