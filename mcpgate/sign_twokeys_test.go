package mcpgate

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"testing"
)

// Two gateways in one process, each with its own key: a signature is
// always made with the signing gateway's key (its own kept HMACs), never
// with the other's, however their signatures interleave.
func TestSignTwoGatewaysKeepTheirKeys(t *testing.T) {
	t.Parallel()
	mk := func(key string) *Gateway {
		g := &Gateway{}
		copy(g.key[:], key)
		g.signers.New = g.newSigner
		return g
	}
	a, b := mk("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), mk("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	want := func(g *Gateway, state string) string {
		m := hmac.New(sha256.New, g.key[:])
		m.Write([]byte(state))
		return state + "." + hex.EncodeToString(m.Sum(nil))
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 300 {
				g, other := a, b
				if (i+j)%2 == 1 {
					g, other = b, a
				}
				state := "mcp-thread/q" + string(rune('a'+j%26))
				if got := g.sign(state); got != want(g, state) {
					t.Errorf("sign(%q) = %s, want %s", state, got, want(g, state))
					return
				}
				if _, ok := other.verify(g.sign(state)); ok {
					t.Errorf("a gateway verified another gateway's signature of %q", state)
					return
				}
			}
		}()
	}
	wg.Wait()
}
