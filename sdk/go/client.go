// Package vpnpanel is the Go client of the vpn-panel API. Its types (types.gen.go) are generated from the panel's
// OpenAPI document by oapi-codegen; this file, resources.go and webhooks.go are a thin hand-written layer over
// them, the same as the TypeScript and Python SDKs': a namespace per resource, lists as iterators over every page,
// one *ApiError, retries of 429 and 503 after Retry-After with an Idempotency-Key on the POSTs the panel
// deduplicates, and VerifyWebhook.
package vpnpanel

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Params are a request's JSON body or query parameters by name, as the API documents them. A body may also be
// any value that marshals to the JSON the operation takes (a generated *JSONBody type).
type Params = map[string]any

// ApiError is the one error of a refused request: the panel's error body (docs/api.md "Errors") and the status.
// Branch on Code; Fields names each input at fault.
type ApiError struct {
	Status    int
	Code      string
	Message   string
	Fields    map[string]string
	RequestID string
}

func (e *ApiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Client is a client of one panel with one API key.
type Client struct {
	baseURL string
	apiKey  string
	// HTTPClient sends the requests; http.DefaultClient when nil.
	HTTPClient *http.Client
	// MaxRetries bounds the retries of a 429 or 503 (and 409 idempotency_key_in_use) before its error is returned.
	MaxRetries int
	// MaxRetryAfter is the longest Retry-After waited for; a longer one is returned at once.
	MaxRetryAfter time.Duration

	Servers    *Servers
	Nodes      *Nodes
	Devices    *Devices
	Groups     *Groups
	Plans      *Plans
	ShareLinks *ShareLinks
	Webhooks   *Webhooks
	Events     *Events
	Activity   *ActivityLog
	Usage      *FleetUsageAPI
}

// New makes a client of the API at baseURL (https://vpn.example.com/api/v1) with an API key vpnk_….
func New(baseURL, apiKey string) *Client {
	c := &Client{baseURL: strings.TrimRight(baseURL, "/"), apiKey: apiKey, MaxRetries: 5, MaxRetryAfter: time.Minute}
	c.Servers = &Servers{resource[Server]{c, "/servers", true}}
	c.Nodes = &Nodes{c}
	c.Devices = &Devices{resource[Device]{c, "/devices", true}}
	c.Groups = &Groups{c}
	c.Plans = &Plans{resource[Plan]{c, "/plans", false}}
	c.ShareLinks = &ShareLinks{c}
	c.Webhooks = &Webhooks{resource[Webhook]{c, "/webhooks", false}}
	c.Events = &Events{c}
	c.Activity = &ActivityLog{c}
	c.Usage = &FleetUsageAPI{c}
	return c
}

type request struct {
	method string
	path   string
	query  Params
	body   any
	// idempotent: the operation honours Idempotency-Key (docs/api.md "Idempotency"), so the request carries a fresh
	// key, the same on each retry, and is retried on 503 too. Any other POST is retried only on 429, which the
	// panel answers before doing anything.
	idempotent bool
}

// send returns the answer's body (nil for a 204) or the error.
func (c *Client) send(ctx context.Context, r request) ([]byte, error) {
	var body []byte
	if r.body != nil {
		encoded, err := json.Marshal(r.body)
		if err != nil {
			return nil, err
		}
		body = encoded
	}
	idempotencyKey := ""
	if r.idempotent {
		idempotencyKey = newKey()
	}
	target := c.baseURL + r.path + queryString(r.query)
	httpClient := c.HTTPClient
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, r.method, target, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
		req.Header.Set("Accept", "application/json")
		if r.body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if idempotencyKey != "" {
			req.Header.Set("Idempotency-Key", idempotencyKey)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return nil, err
		}
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode < 300 {
			return answer, nil
		}
		apiErr := apiErrorOf(resp, answer)
		wait := retryAfter(resp.Header.Get("Retry-After"))
		retried := (resp.StatusCode == 429 || resp.StatusCode == 503 || apiErr.Code == "idempotency_key_in_use") &&
			(r.method != http.MethodPost || r.idempotent || resp.StatusCode == 429)
		if !retried || attempt >= c.MaxRetries || wait > c.MaxRetryAfter {
			return nil, apiErr
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// call sends the request and decodes its JSON answer into T.
func call[T any](ctx context.Context, c *Client, r request) (T, error) {
	var out T
	answer, err := c.send(ctx, r)
	if err != nil || len(answer) == 0 {
		return out, err
	}
	return out, json.Unmarshal(answer, &out)
}

// list iterates every item of a paged list (docs/api.md "Paging"), asking the next page with after = the last id.
// An error ends the iteration, yielded with the zero item.
func list[T any](ctx context.Context, c *Client, path string, query Params) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		page := Params{}
		for name, value := range query {
			page[name] = value
		}
		for {
			answer, err := call[struct {
				Data    []json.RawMessage `json:"data"`
				HasMore bool              `json:"has_more"`
			}](ctx, c, request{method: http.MethodGet, path: path, query: page})
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, raw := range answer.Data {
				var item T
				if err := json.Unmarshal(raw, &item); err != nil {
					yield(item, err)
					return
				}
				if !yield(item, nil) {
					return
				}
			}
			if !answer.HasMore || len(answer.Data) == 0 {
				return
			}
			var last struct {
				ID int64 `json:"id"`
			}
			if err := json.Unmarshal(answer.Data[len(answer.Data)-1], &last); err != nil {
				var zero T
				yield(zero, err)
				return
			}
			page["after"] = last.ID
		}
	}
}

func newKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func queryString(query Params) string {
	values := url.Values{}
	for name, value := range query {
		if value != nil {
			values.Set(name, fmt.Sprint(value))
		}
	}
	if len(values) == 0 {
		return ""
	}
	return "?" + values.Encode()
}

// retryAfter is what a Retry-After asks for (delta-seconds or an HTTP date); a second when absent or unreadable.
func retryAfter(header string) time.Duration {
	if seconds, err := strconv.Atoi(strings.TrimSpace(header)); err == nil && seconds >= 0 {
		return time.Duration(seconds) * time.Second
	}
	if at, err := http.ParseTime(header); err == nil {
		return max(0, time.Until(at))
	}
	return time.Second
}

func apiErrorOf(resp *http.Response, body []byte) *ApiError {
	var parsed struct {
		Error *struct {
			Code    string            `json:"code"`
			Message string            `json:"message"`
			Fields  map[string]string `json:"fields"`
		} `json:"error"`
	}
	requestID := resp.Header.Get("X-Request-Id")
	if json.Unmarshal(body, &parsed) != nil || parsed.Error == nil {
		// Not the panel's error body (a proxy's page): the status says what there is to say.
		text := string(body[:min(len(body), 200)])
		return &ApiError{Status: resp.StatusCode, Code: fmt.Sprintf("http_%d", resp.StatusCode), Message: text, Fields: map[string]string{}, RequestID: requestID}
	}
	fields := parsed.Error.Fields
	if fields == nil {
		fields = map[string]string{}
	}
	return &ApiError{Status: resp.StatusCode, Code: parsed.Error.Code, Message: parsed.Error.Message, Fields: fields, RequestID: requestID}
}
