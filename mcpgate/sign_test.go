package mcpgate

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
)

// A signature made with a kept HMAC is the one a new HMAC of the key
// makes, however many were made before it and at once.
func TestSignAsANewHMAC(t *testing.T) {
	t.Parallel()
	g := &Gateway{}
	copy(g.key[:], "0123456789abcdef0123456789abcdef")
	g.signers.New = g.newSigner
	want := func(state string) string {
		m := hmac.New(sha256.New, g.key[:])
		m.Write([]byte(state))
		return state + "." + hex.EncodeToString(m.Sum(nil))
	}
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
