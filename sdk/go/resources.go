package vpnpanel

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
)

func at(id any) string { return url.PathEscape(fmt.Sprint(id)) }

func get[T any](ctx context.Context, c *Client, path string) (T, error) {
	return call[T](ctx, c, request{method: http.MethodGet, path: path})
}

func del(ctx context.Context, c *Client, path string, query Params) error {
	_, err := c.send(ctx, request{method: http.MethodDelete, path: path, query: query})
	return err
}

func write[T any](ctx context.Context, c *Client, method, path string, body any, idempotent bool) (T, error) {
	return call[T](ctx, c, request{method: method, path: path, body: body, idempotent: idempotent})
}

// resource is what most resources have: list, get, create, update and delete under one path.
type resource[T any] struct {
	c    *Client
	path string
	// idempotentCreate: its POST honours Idempotency-Key, so it carries one and is retried on 503 too.
	idempotentCreate bool
}

func (r *resource[T]) List(ctx context.Context, query Params) iter.Seq2[T, error] {
	return list[T](ctx, r.c, r.path, query)
}
func (r *resource[T]) Get(ctx context.Context, id int) (T, error) {
	return get[T](ctx, r.c, r.path+"/"+at(id))
}
func (r *resource[T]) Create(ctx context.Context, body any) (T, error) {
	return write[T](ctx, r.c, http.MethodPost, r.path, body, r.idempotentCreate)
}
func (r *resource[T]) Update(ctx context.Context, id int, body any) (T, error) {
	return write[T](ctx, r.c, http.MethodPatch, r.path+"/"+at(id), body, false)
}
func (r *resource[T]) Delete(ctx context.Context, id int) error {
	return del(ctx, r.c, r.path+"/"+at(id), nil)
}

// Servers are the WireGuard and AmneziaWG servers on the panel's nodes.
type Servers struct{ resource[Server] }

// Delete deletes a server; force deletes its devices with it.
func (s *Servers) Delete(ctx context.Context, id int, force bool) error {
	return del(ctx, s.c, "/servers/"+at(id), Params{"force": force})
}

// Nodes are the machines servers run on.
type Nodes struct{ c *Client }

func (n *Nodes) List(ctx context.Context) iter.Seq2[Node, error] {
	return list[Node](ctx, n.c, "/nodes", nil)
}
func (n *Nodes) Get(ctx context.Context, id int) (Node, error) {
	return get[Node](ctx, n.c, "/nodes/"+at(id))
}

// Devices are the clients' peers.
type Devices struct{ resource[Device] }

func (d *Devices) Usage(ctx context.Context, id int) (UsageReport, error) {
	return get[UsageReport](ctx, d.c, "/devices/"+at(id)+"/usage")
}

// Config is the device's client config (wg-quick text).
func (d *Devices) Config(ctx context.Context, id int, query Params) (string, error) {
	answer, err := d.c.send(ctx, request{method: http.MethodGet, path: "/devices/" + at(id) + "/config", query: query})
	return string(answer), err
}
func (d *Devices) Move(ctx context.Context, id int, body any) (Device, error) {
	return write[Device](ctx, d.c, http.MethodPost, "/devices/"+at(id)+"/move", body, true)
}
func (d *Devices) ResetUsage(ctx context.Context, id int) (Device, error) {
	return write[Device](ctx, d.c, http.MethodPost, "/devices/"+at(id)+"/usage/reset", nil, true)
}
func (d *Devices) Renew(ctx context.Context, id int, body any) (Device, error) {
	return write[Device](ctx, d.c, http.MethodPost, "/devices/"+at(id)+"/renew", body, true)
}
func (d *Devices) TopUp(ctx context.Context, id int, body any) (Device, error) {
	return write[Device](ctx, d.c, http.MethodPost, "/devices/"+at(id)+"/top-up", body, true)
}

// Groups are the devices of one external_id (a customer).
type Groups struct{ c *Client }

func (g *Groups) Get(ctx context.Context, externalID string) (Group, error) {
	return get[Group](ctx, g.c, "/groups/"+at(externalID))
}
func (g *Groups) Devices(ctx context.Context, externalID string) iter.Seq2[Device, error] {
	return list[Device](ctx, g.c, "/devices", Params{"external_id": externalID})
}
func (g *Groups) Update(ctx context.Context, externalID string, body any) (Group, error) {
	return write[Group](ctx, g.c, http.MethodPatch, "/groups/"+at(externalID), body, false)
}
func (g *Groups) Delete(ctx context.Context, externalID string) error {
	return del(ctx, g.c, "/groups/"+at(externalID), nil)
}
func (g *Groups) ResetUsage(ctx context.Context, externalID string) (Group, error) {
	return write[Group](ctx, g.c, http.MethodPost, "/groups/"+at(externalID)+"/usage/reset", nil, true)
}
func (g *Groups) Renew(ctx context.Context, externalID string, body any) (Group, error) {
	return write[Group](ctx, g.c, http.MethodPost, "/groups/"+at(externalID)+"/renew", body, true)
}

// Plans are what devices are sold as.
type Plans struct{ resource[Plan] }

// ShareLinks are devices' share links: a page that shows a config to whoever has the link.
type ShareLinks struct{ c *Client }

func (s *ShareLinks) Create(ctx context.Context, deviceID int, body any) (map[string]any, error) {
	if body == nil {
		body = Params{}
	}
	return write[map[string]any](ctx, s.c, http.MethodPost, "/devices/"+at(deviceID)+"/share", body, false)
}
func (s *ShareLinks) Get(ctx context.Context, deviceID int) (map[string]any, error) {
	return get[map[string]any](ctx, s.c, "/devices/"+at(deviceID)+"/share")
}
func (s *ShareLinks) Delete(ctx context.Context, deviceID int) error {
	return del(ctx, s.c, "/devices/"+at(deviceID)+"/share", nil)
}

// NewWebhook is a webhook as created: with its signing secret, shown only then (keep it for VerifyWebhook).
type NewWebhook struct {
	Webhook
	Secret string `json:"secret"`
}

// Webhooks are the receivers of the panel's events.
type Webhooks struct{ resource[Webhook] }

// Create answers the webhook with its signing secret.
func (w *Webhooks) Create(ctx context.Context, body any) (NewWebhook, error) {
	return write[NewWebhook](ctx, w.c, http.MethodPost, "/webhooks", body, false)
}
func (w *Webhooks) Deliveries(ctx context.Context, id int, query Params) iter.Seq2[WebhookDelivery, error] {
	return list[WebhookDelivery](ctx, w.c, "/webhooks/"+at(id)+"/deliveries", query)
}
func (w *Webhooks) Ping(ctx context.Context, id int) (WebhookDelivery, error) {
	return write[WebhookDelivery](ctx, w.c, http.MethodPost, "/webhooks/"+at(id)+"/ping", nil, false)
}

// Events are what happened to devices, servers and nodes.
type Events struct{ c *Client }

func (e *Events) List(ctx context.Context, query Params) iter.Seq2[Event, error] {
	return list[Event](ctx, e.c, "/events", query)
}

// ActivityLog is who changed what.
type ActivityLog struct{ c *Client }

func (a *ActivityLog) List(ctx context.Context, query Params) iter.Seq2[ActivityEntry, error] {
	return list[ActivityEntry](ctx, a.c, "/activity", query)
}

// FleetUsageAPI is the whole fleet's usage by day.
type FleetUsageAPI struct{ c *Client }

func (u *FleetUsageAPI) Get(ctx context.Context, query Params) (FleetUsage, error) {
	return call[FleetUsage](ctx, u.c, request{method: http.MethodGet, path: "/usage", query: query})
}
