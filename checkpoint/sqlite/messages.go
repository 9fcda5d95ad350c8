package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/tollgate-ai/tollgate/checkpoint/internal/messages"
)

// A thread's messages are rows of the messages table (schema 6), one per
// message, each the JSON value as the writer gave it. LoadThread returns
// them as one JSON array: "[", the bodies joined by ",", "]". So each
// message keeps its bytes; the spacing between them is not kept.

// checkMessages refuses an appended message that is not one JSON value:
// it would make the array LoadThread returns something else (two
// messages, or not JSON at all).
func checkMessages(thread string, msgs []json.RawMessage) error {
	for i, m := range msgs {
		if !json.Valid(m) {
			return fmt.Errorf("sqlite: thread %q: appended message %d is not one JSON value (it starts %q)", thread, i, clip(m))
		}
	}
	return nil
}

func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// messagesSize is the bytes of msgs' bodies.
func messagesSize(msgs []json.RawMessage) int64 {
	var n int64
	for _, m := range msgs {
		n += int64(len(m))
	}
	return n
}

// splitMessagesMigration is the Go step of schema 6: every thread's array
// in threads.messages becomes rows, split as CreateThread splits (each
// element its bytes as written; JSON null is no messages), and the column
// NULL. What is not a JSON array (an older store kept any JSON, and
// SQLite even what is not JSON) stays in the column as it was.
// Threads are read a page at a time in id order, so that a large
// database is not held in memory at once.
func splitMessagesMigration(ctx context.Context, tx *sql.Tx) error {
	insert, err := tx.PrepareContext(ctx, qInsertMessage)
	if err != nil {
		return err
	}
	defer insert.Close()
	// A page holds ids only, and each thread's messages are read, split
	// and dropped one thread at a time: a thread may be tens of MB.
	const page = 100
	type thread struct {
		id   string
		msgs string
	}
	var after string
	for first := true; ; first = false {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM threads
WHERE messages IS NOT NULL AND (?1 OR id > ?2) ORDER BY id LIMIT ?3`, first, after, page)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range ids {
			t := thread{id: id}
			if err := tx.QueryRowContext(ctx, `SELECT messages FROM threads WHERE id = ?`, id).Scan(&t.msgs); err != nil {
				return fmt.Errorf("thread %q: %w", id, err)
			}
			msgs, err := messages.Split(json.RawMessage(t.msgs))
			if err != nil {
				continue // kept as it is: LoadThread returns it
			}
			for i, m := range msgs {
				if _, err := insert.ExecContext(ctx, t.id, i, string(m)); err != nil {
					return fmt.Errorf("thread %q: %w", t.id, err)
				}
			}
			if _, err := tx.ExecContext(ctx, `UPDATE threads SET messages = NULL, message_count = ?, message_bytes = ? WHERE id = ?`,
				len(msgs), messagesSize(msgs), t.id); err != nil {
				return fmt.Errorf("thread %q: %w", t.id, err)
			}
		}
		if len(ids) < page {
			return nil
		}
		after = ids[len(ids)-1]
	}
}
