package notify

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Sign returns the Standard Webhooks headers of a message: webhook-id,
// webhook-timestamp (Unix seconds) and webhook-signature, "v1," and the
// base64 HMAC-SHA256, with the secret's key, of "id.timestamp.body".
// secret is "whsec_" and the key in base64.
func Sign(secret, id string, at time.Time, body []byte) (http.Header, error) {
	key, err := webhookKey(secret)
	if err != nil {
		return nil, err
	}
	return signWith(key, id, at, body)
}

func signWith(key []byte, id string, at time.Time, body []byte) (http.Header, error) {
	wh, err := standardwebhooks.NewWebhookRaw(key)
	if err != nil {
		return nil, err
	}
	sig, err := wh.Sign(id, at, body)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(standardwebhooks.HeaderWebhookID, id)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
	h.Set(standardwebhooks.HeaderWebhookSignature, sig)
	return h, nil
}

// Verify checks a webhook's signature headers against its body, as a
// receiver does (the timestamp within five minutes of now). secret is
// "whsec_" and the key in base64.
func Verify(secret string, header http.Header, body []byte) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	return wh.Verify(body, header)
}

// sendWebhook posts d's payload to its URL, signed with key, and says
// whether a failure is worth retrying.
func (n *Notifier) sendWebhook(ctx context.Context, d *checkpoint.Delivery) error {
	w := n.webhooks[d.Target]
	if w == nil {
		return permanent(fmt.Errorf("no webhook %s in the notifications file (any more)", Shown(d.Target)))
	}
	h, err := signWith(w.key, d.ID, n.clk.Now(), d.Payload)
	if err != nil {
		return permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Target, bytes.NewReader(d.Payload))
	if err != nil {
		return permanent(err)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tollgate-webhooks")
	resp, err := n.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusGone:
		// The spec's way for a receiver to say "stop sending".
		return permanent(fmt.Errorf("%s answered 410 Gone", Shown(d.Target)))
	}
	return fmt.Errorf("%s answered %s", Shown(d.Target), resp.Status)
}

// Shown is a delivery's target as logs and lists show it: a URL without
// its query or user (where a token may be), else as it is.
func Shown(target string) string {
	u, err := url.Parse(target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return target
	}
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	u.User = nil
	return u.String()
}
