// Package messages holds how every store keeps a thread's messages: one
// record per message, joined back into the thread's JSON array on load.
package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Split splits a thread's Messages (a JSON array) into its
// messages, each one with its bytes as written; stores keep a thread as one
// record per message so that appending costs what is appended. Empty or
// null Messages has none; anything but an array is refused.
func Split(raw json.RawMessage) ([]json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, nil
	}
	if trimmed[0] != '[' {
		return nil, errors.New("checkpoint: a thread's Messages must be a JSON array")
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(trimmed, &msgs); err != nil {
		return nil, fmt.Errorf("checkpoint: a thread's Messages are not a valid JSON array: %w", err)
	}
	for i, m := range msgs {
		// json.RawMessage keeps the element's bytes; only the spacing
		// around it is dropped.
		msgs[i] = bytes.TrimSpace(m)
	}
	return msgs, nil
}

// Join is the Messages of a thread whose messages are msgs: "[", the
// messages separated by ",", "]".
func Join(msgs []json.RawMessage) json.RawMessage {
	size := 0
	for _, m := range msgs {
		size += len(m)
	}
	j := NewJoiner(int64(size), int64(len(msgs)))
	for _, m := range msgs {
		j.Add(m)
	}
	return j.Messages()
}

// A Joiner builds a thread's Messages from its messages as a store reads
// them, one at a time, in one buffer.
type Joiner struct {
	buf []byte
	n   int
}

// NewJoiner returns a Joiner whose buffer is sized for count messages of
// size bytes in all (a hint, capped: the buffer grows past it if need be).
func NewJoiner(size, count int64) *Joiner {
	b := make([]byte, 1, min(size+count+2, 64<<20))
	b[0] = '['
	return &Joiner{buf: b}
}

// Add appends the next message.
func (j *Joiner) Add(m []byte) {
	if j.n > 0 {
		j.buf = append(j.buf, ',')
	}
	j.buf = append(j.buf, m...)
	j.n++
}

// AddString is Add of a message held as a string (a driver's copy).
func (j *Joiner) AddString(m string) {
	if j.n > 0 {
		j.buf = append(j.buf, ',')
	}
	j.buf = append(j.buf, m...)
	j.n++
}

// Len is the number of messages added.
func (j *Joiner) Len() int { return j.n }

// Messages is the array of the messages added.
func (j *Joiner) Messages() json.RawMessage { return append(j.buf, ']') }
