package vpnpanel

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrWebhookVerification is wrapped by every error of VerifyWebhook: a delivery that is not the panel's.
var ErrWebhookVerification = errors.New("webhook verification failed")

// webhookTolerance is how far a delivery's webhook-timestamp may be from now (Standard Webhooks' default).
const webhookTolerance = 5 * time.Minute

func refused(why string) error { return errors.Join(ErrWebhookVerification, errors.New(why)) }

// VerifyWebhook returns the event of a webhook delivery after checking its Standard Webhooks signature
// (webhook-signature: "v1," + base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>" keyed by the secret
// after "whsec_") and that its timestamp is within 5 minutes of now. body is the raw request body as received.
func VerifyWebhook(secret string, headers http.Header, body []byte) (Event, error) {
	return verifyWebhookAt(secret, headers, body, time.Now())
}

func verifyWebhookAt(secret string, headers http.Header, body []byte, now time.Time) (Event, error) {
	var event Event
	id, timestamp, signatures := headers.Get("webhook-id"), headers.Get("webhook-timestamp"), headers.Get("webhook-signature")
	if id == "" || timestamp == "" || signatures == "" {
		return event, refused("missing webhook-id, webhook-timestamp or webhook-signature header")
	}
	seconds, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return event, refused("webhook-timestamp is not a number")
	}
	if math.Abs(float64(now.Unix()-seconds)) > webhookTolerance.Seconds() {
		return event, refused("webhook-timestamp is too far from now")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return event, refused("the secret is not base64")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	expected := mac.Sum(nil)
	for _, signature := range strings.Split(signatures, " ") {
		version, given, found := strings.Cut(signature, ",")
		if !found || version != "v1" {
			continue
		}
		decoded, err := base64.StdEncoding.DecodeString(given)
		if err == nil && hmac.Equal(decoded, expected) {
			return event, json.Unmarshal(body, &event)
		}
	}
	return event, refused("no valid signature")
}
