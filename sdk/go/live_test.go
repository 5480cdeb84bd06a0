package vpnpanel

// Against a live panel: run by test/sdk/go.test.ts, which starts one and sets VPN_PANEL_URL, VPN_PANEL_KEY (exempt
// from the rate limit) and VPN_PANEL_LIMITED_KEY (under it).

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
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
