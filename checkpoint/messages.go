package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// SplitMessages splits a thread's Messages (a JSON array) into its
// messages, each one with its bytes as written; stores keep a thread as one
// record per message so that appending costs what is appended. Empty or
// null Messages has none; anything but an array is refused.
func SplitMessages(raw json.RawMessage) ([]json.RawMessage, error) {
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

// JoinMessages is the Messages of a thread whose messages are msgs: "[",
// the messages separated by ",", "]".
func JoinMessages(msgs []json.RawMessage) json.RawMessage {
	n := 2
	for _, m := range msgs {
		n += len(m) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, m := range msgs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m...)
	}
	return append(out, ']')
}
