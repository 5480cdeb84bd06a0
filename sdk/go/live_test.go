package vpnpanel

// Against a live panel: run by test/sdk/go.test.ts, which starts one and sets VPN_PANEL_URL, VPN_PANEL_KEY (exempt
// from the rate limit) and VPN_PANEL_LIMITED_KEY (under it).

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func livePanel(t *testing.T) (*Client, int) {
	t.Helper()
	url := os.Getenv("VPN_PANEL_URL")
	if url == "" {
		t.Skip("no live panel (run from test/sdk/go.test.ts)")
	}
	panel := New(url, os.Getenv("VPN_PANEL_KEY"))
	server, err := panel.Servers.Create(context.Background(), Params{"name": fmt.Sprintf("sdk-go-%s", t.Name())})
	if err != nil {
		t.Fatal(err)
	}
	return panel, server.Id
}

func TestLists60DevicesAcrossPages(t *testing.T) {
	panel, serverID := livePanel(t)
	ctx := context.Background()
	var made, listed []int
	for i := range 60 {
		device, err := panel.Devices.Create(ctx, Params{"server_id": serverID, "name": fmt.Sprintf("d%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, device.Id)
	}
	for device, err := range panel.Devices.List(ctx, Params{"server_id": serverID, "limit": 25}) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, device.Id)
	}
	if !slices.Equal(listed, made) {
		t.Fatalf("listed %v, made %v", listed, made)
	}
}

func TestDuplicateNameIsApiError(t *testing.T) {
	panel, serverID := livePanel(t)
	ctx := context.Background()
	if _, err := panel.Devices.Create(ctx, Params{"server_id": serverID, "name": "twice"}); err != nil {
		t.Fatal(err)
	}
	_, err := panel.Devices.Create(ctx, Params{"server_id": serverID, "name": "twice"})
	var apiErr *ApiError
	if !errors.As(err, &apiErr) || apiErr.Status != 409 || apiErr.Code != "name_taken" {
		t.Fatalf("want 409 name_taken, got %v", err)
	}
	_, err = panel.Devices.Update(ctx, 1, Params{"data_limit": -1})
	if !errors.As(err, &apiErr) || apiErr.Code != "validation_failed" || apiErr.Fields["data_limit"] == "" {
		t.Fatalf("want validation_failed naming data_limit, got %#v", err)
	}
}

func Test80QuickReadsPassTheRateLimit(t *testing.T) {
	_, serverID := livePanel(t)
	limited := New(os.Getenv("VPN_PANEL_URL"), os.Getenv("VPN_PANEL_LIMITED_KEY"))
	started := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 80)
	for range 80 {
		wg.Go(func() {
			server, err := limited.Servers.Get(context.Background(), serverID)
			if err == nil && server.Id != serverID {
				err = fmt.Errorf("read server %d", server.Id)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Bursts of 60, then 10 a second: the last 20 waited for Retry-After.
	if time.Since(started) < time.Second {
		t.Fatalf("80 reads in %v: the rate limit was not reached", time.Since(started))
	}
}

func TestWebhookFromThePanelAcceptedForgedRefused(t *testing.T) {
	panel, _ := livePanel(t)
	ctx := context.Background()
	type delivery struct {
		headers http.Header
		body    []byte
	}
	received := make(chan delivery, 4)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		received <- delivery{r.Header.Clone(), body}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	hook, err := panel.Webhooks.Create(ctx, Params{"url": receiver.URL + "/hook", "events": []string{"device.created"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := panel.Webhooks.Ping(ctx, hook.Id); err != nil {
		t.Fatal(err)
	}
	var got delivery
	select {
	case got = <-received:
	case <-time.After(10 * time.Second):
		t.Fatal("the ping did not arrive")
	}
	event, err := VerifyWebhook(hook.Secret, got.headers, got.body)
	if err != nil || event.Kind != "ping" {
		t.Fatalf("the panel's delivery: %v, %+v", err, event)
	}
	forged := "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x07", 32)))
	tampered := []byte(strings.Replace(string(got.body), "ping", "pong", 1))
	for name, err := range map[string]error{
		"forged":   second(VerifyWebhook(forged, got.headers, got.body)),
		"tampered": second(VerifyWebhook(hook.Secret, got.headers, tampered)),
		"stale":    second(verifyWebhookAt(hook.Secret, got.headers, got.body, time.Now().Add(10*time.Minute))),
	} {
		if !errors.Is(err, ErrWebhookVerification) {
			t.Errorf("%s delivery: want ErrWebhookVerification, got %v", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestReachesEveryOperationOfEachNamespace(t *testing.T) {
	panel, serverID := livePanel(t)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	all := func(seq func(func(int, error) bool)) []int {
		var ids []int
		for id, err := range seq {
			must(err)
			ids = append(ids, id)
		}
		return ids
	}
	ids := func(seq iter.Seq2[Device, error]) func(func(int, error) bool) {
		return func(yield func(int, error) bool) {
			for d, err := range seq {
				if !yield(d.Id, err) {
					return
				}
			}
		}
	}
	server, err := panel.Servers.Update(ctx, serverID, Params{"city": "Frankfurt"})
	must(err)
	if server.City != "Frankfurt" {
		t.Fatalf("city %q", server.City)
	}
	for node, err := range panel.Nodes.List(ctx) {
		must(err)
		_, err = panel.Nodes.Get(ctx, node.Id)
		must(err)
	}
	plan, err := panel.Plans.Create(ctx, Params{"name": "monthly", "data_limit": 1_000_000_000, "duration_days": 30})
	must(err)
	_, err = panel.Plans.Update(ctx, plan.Id, Params{"max_devices": 3})
	must(err)
	device, err := panel.Devices.Create(ctx, Params{"server_id": serverID, "plan_id": plan.Id, "external_id": "cust-1"})
	must(err)
	config, err := panel.Devices.Config(ctx, device.Id, nil)
	must(err)
	if !strings.Contains(config, "[Interface]") {
		t.Fatalf("config %q", config)
	}
	_, err = panel.Devices.Usage(ctx, device.Id)
	must(err)
	_, err = panel.Devices.Renew(ctx, device.Id, Params{"days": 1})
	must(err)
	_, err = panel.Devices.TopUp(ctx, device.Id, Params{"bytes": 1000})
	must(err)
	_, err = panel.Devices.ResetUsage(ctx, device.Id)
	must(err)
	other, err := panel.Servers.Create(ctx, Params{"name": "sdk-go-2"})
	must(err)
	moved, err := panel.Devices.Move(ctx, device.Id, Params{"server_id": other.Id})
	must(err)
	if moved.ServerId != other.Id {
		t.Fatalf("moved to %d", moved.ServerId)
	}
	group, err := panel.Groups.Get(ctx, "cust-1")
	must(err)
	if group.DeviceCount != 1 || !slices.Equal(all(ids(panel.Groups.Devices(ctx, "cust-1"))), []int{device.Id}) {
		t.Fatalf("group %+v", group)
	}
	_, err = panel.Groups.Update(ctx, "cust-1", Params{"enabled": true})
	must(err)
	_, err = panel.Groups.Renew(ctx, "cust-1", Params{"days": 1})
	must(err)
	_, err = panel.Groups.ResetUsage(ctx, "cust-1")
	must(err)
	_, err = panel.ShareLinks.Create(ctx, device.Id, nil)
	must(err)
	_, err = panel.ShareLinks.Get(ctx, device.Id)
	must(err)
	must(panel.ShareLinks.Delete(ctx, device.Id))
	hook, err := panel.Webhooks.Create(ctx, Params{"url": "https://receiver.example/hook", "events": []string{"device.deleted"}})
	must(err)
	for _, err := range panel.Webhooks.Deliveries(ctx, hook.Id, nil) {
		must(err)
	}
	must(panel.Webhooks.Delete(ctx, hook.Id))
	for _, err := range panel.Events.List(ctx, Params{"kind": "device.created"}) {
		must(err)
	}
	for _, err := range panel.Activity.List(ctx, nil) {
		must(err)
	}
	_, err = panel.Usage.Get(ctx, nil)
	must(err)
	must(panel.Groups.Delete(ctx, "cust-1"))
	var apiErr *ApiError
	if _, err := panel.Devices.Get(ctx, device.Id); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("want 404, got %v", err)
	}
	must(panel.Plans.Delete(ctx, plan.Id))
	must(panel.Servers.Delete(ctx, other.Id, false))
}
