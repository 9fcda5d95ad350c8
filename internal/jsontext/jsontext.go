// Package jsontext encodes JSON for people to read: "a > b" stays
// "a > b", where encoding/json's Marshal writes "a \u003e b" to be safe
// inside HTML. Everything tollgate stores for people and models to read
// (messages, tool results, question payloads, the audit log) is encoded
// here; digests are not (their bytes are fixed: see agent.CallDigest).
package jsontext

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without HTML escaping.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
