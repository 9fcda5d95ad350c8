package interrupt

import (
	"strings"

	"github.com/tollgate-ai/tollgate/agent"
)

// IDPrefix starts every interrupt id.
const IDPrefix = "approve_"

const hexDigits = "0123456789abcdef"

// ID is the id of the question that asks approval for the tool call with id
// toolCallID: "approve_" plus the call id, with every character other than
// an ASCII letter, an ASCII digit, '_' or '-' written as '.' and two
// lowercase hex digits per UTF-8 byte ("fc:1" becomes "approve_fc.3a1").
// '.' itself is escaped, and so is every byte of a non-ASCII character and
// every byte of invalid UTF-8, so the id is ASCII and different call ids
// always give different question ids. The id is deterministic: asking again
// for the same call (after a restart, say) finds the same question.
func ID(toolCallID string) string {
	return IDPrefix + agent.EscapeID(toolCallID)
}

func idSafe(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// parseID is the inverse of ID: it returns the tool call id of an interrupt
// id, and false for a string ID never returns.
func parseID(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, IDPrefix)
	if !ok {
		return "", false
	}
	out := make([]byte, 0, len(rest))
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if idSafe(c) {
			out = append(out, c)
			continue
		}
		if c != '.' || i+2 >= len(rest) {
			return "", false
		}
		hi, lo := strings.IndexByte(hexDigits, rest[i+1]), strings.IndexByte(hexDigits, rest[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		b := byte(hi<<4 | lo)
		if idSafe(b) {
			return "", false // ID never escapes a safe byte
		}
		out = append(out, b)
		i += 2
	}
	return string(out), true
}
