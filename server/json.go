package server

import (
	"net/http"
	"strconv"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// writeJSON writes v with status, never escaping <, > and & (people read
// these values, and shell commands are full of '>').
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := encodeJSON(v)
	if err != nil {
		// Only a value of ours that cannot be encoded gets here: a bug,
		// reported as one rather than as half a body.
		body = []byte(`{"error":{"code":"internal","message":"the response cannot be encoded"}}`)
		status = http.StatusInternalServerError
	}
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// encodeJSON is json.Marshal without HTML escaping.
func encodeJSON(v any) ([]byte, error) { return jsontext.Marshal(v) }
