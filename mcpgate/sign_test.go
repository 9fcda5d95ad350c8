package mcpgate

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
)

// signingGateway is a gateway with only what signing needs: its key and
// its kept HMACs, set as New sets them.
func signingGateway(key string) *Gateway {
	g := &Gateway{}
	copy(g.key[:], key)
	g.signers.New = g.newSigner
	return g
}

// newHMACSignature is state signed with a new HMAC of g's key: what
// g.sign must write.
func newHMACSignature(g *Gateway, state string) string {
	m := hmac.New(sha256.New, g.key[:])
	m.Write([]byte(state))
	return state + "." + hex.EncodeToString(m.Sum(nil))
}

// A signature made with a kept HMAC is the one a new HMAC of the key
// makes, however many were made before it and at once.
func TestSignAsANewHMAC(t *testing.T) {
	t.Parallel()
	g := signingGateway("0123456789abcdef0123456789abcdef")
	want := func(state string) string { return newHMACSignature(g, state) }
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				state := strings.Repeat("x", i*j%97) + "/q"
				if got := g.sign(state); got != want(state) {
					t.Errorf("sign(%q) = %s, want %s", state, got, want(state))
					return
				}
				if s, ok := g.verify(want(state)); !ok || s != state {
					t.Errorf("verify of %q's signature: %q, %v", state, s, ok)
					return
				}
			}
		}()
	}
	wg.Wait()
	if _, ok := g.verify("x/q." + strings.Repeat("0", 64)); ok {
		t.Error("verify took a wrong signature")
	}
}

// Two gateways in one process, each with its own key: a signature is
// always made with the signing gateway's key (its own kept HMACs), never
// with the other's, however their signatures interleave.
func TestSignTwoGatewaysKeepTheirKeys(t *testing.T) {
	t.Parallel()
	a, b := signingGateway("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), signingGateway("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	want := newHMACSignature
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
