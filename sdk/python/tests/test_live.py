"""vpn_panel against a live panel: run by test/sdk/python.test.ts, which starts one and sets VPN_PANEL_URL,
VPN_PANEL_KEY (exempt from the rate limit) and VPN_PANEL_LIMITED_KEY (under it)."""

import base64
import http.server
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from vpn_panel import ApiError, Client, WebhookVerificationError, verify_webhook

URL = os.environ.get("VPN_PANEL_URL")
pytestmark = pytest.mark.skipif(URL is None, reason="no live panel (run from test/sdk/python.test.ts)")


@pytest.fixture(scope="module")
def panel() -> Client:
    return Client(base_url=URL, api_key=os.environ["VPN_PANEL_KEY"])


@pytest.fixture(scope="module")
def server_id(panel: Client) -> int:
    return panel.servers.create(name="sdk-py")["id"]


def test_lists_60_devices_across_pages(panel: Client, server_id: int) -> None:
    made = [panel.devices.create(server_id=server_id, name=f"d{i}")["id"] for i in range(60)]
    listed = [device["id"] for device in panel.devices.list(server_id=server_id, limit=25)]
    assert listed == made


def test_duplicate_name_raises_api_error(panel: Client, server_id: int) -> None:
    panel.devices.create(server_id=server_id, name="twice")
    with pytest.raises(ApiError) as duplicate:
        panel.devices.create(server_id=server_id, name="twice")
    assert (duplicate.value.status, duplicate.value.code) == (409, "name_taken")
    with pytest.raises(ApiError) as invalid:
        panel.devices.update(1, data_limit=-1)
    assert invalid.value.code == "validation_failed" and "data_limit" in invalid.value.fields


def test_80_quick_reads_pass_the_rate_limit(server_id: int) -> None:
    limited = Client(base_url=URL, api_key=os.environ["VPN_PANEL_LIMITED_KEY"])
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=80) as pool:
        reads = list(pool.map(lambda _: limited.servers.get(server_id), range(80)))
    assert [read["id"] for read in reads] == [server_id] * 80
    # Bursts of 60, then 10 a second: the last 20 waited for Retry-After.
    assert time.monotonic() - started >= 1


def test_webhook_from_the_panel_accepted_and_forged_refused(panel: Client) -> None:
    received: list[tuple[dict[str, str], bytes]] = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            received.append((dict(self.headers.items()), body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        port = receiver.server_address[1]
        hook = panel.webhooks.create(url=f"http://127.0.0.1:{port}/hook", events=["device.created"])
        panel.webhooks.ping(hook["id"])
        deadline = time.monotonic() + 10
        while not received and time.monotonic() < deadline:
            time.sleep(0.02)
        assert received, "the ping arrived"
        headers, body = received[0]
        assert verify_webhook(hook["secret"], headers, body)["kind"] == "ping"

        forged_secret = "whsec_" + base64.b64encode(bytes([7] * 32)).decode()
        with pytest.raises(WebhookVerificationError):
            verify_webhook(forged_secret, headers, body)
        with pytest.raises(WebhookVerificationError):
            verify_webhook(hook["secret"], headers, body.replace(b"ping", b"pong"))
        with pytest.raises(WebhookVerificationError):
            verify_webhook(hook["secret"], headers, body, now_seconds=time.time() + 600)
    finally:
        receiver.shutdown()


def test_reaches_every_operation_of_each_namespace(panel: Client, server_id: int) -> None:
    assert panel.servers.get(server_id)["id"] == server_id
    assert any(s["id"] == server_id for s in panel.servers.list())
    assert panel.servers.update(server_id, city="Frankfurt")["city"] == "Frankfurt"
    node = next(panel.nodes.list())
    assert panel.nodes.get(node["id"])["id"] == node["id"]

    plan = panel.plans.create(name="monthly", data_limit=10**9, duration_days=30, max_devices=2)
    assert panel.plans.get(plan["id"])["name"] == "monthly"
    assert panel.plans.update(plan["id"], max_devices=3)["max_devices"] == 3
    assert any(p["id"] == plan["id"] for p in panel.plans.list())

    device = panel.devices.create(server_id=server_id, plan_id=plan["id"], external_id="cust-1")
    assert panel.devices.get(device["id"])["external_id"] == "cust-1"
    assert panel.devices.update(device["id"], name="renamed")["name"] == "renamed"
    assert "[Interface]" in panel.devices.config(device["id"])
    assert isinstance(panel.devices.usage(device["id"])["daily"], list)
    panel.devices.renew(device["id"], days=1)
    panel.devices.top_up(device["id"], bytes=1000)
    panel.devices.reset_usage(device["id"])
    other = panel.servers.create(name="sdk-py-2")
    assert panel.devices.move(device["id"], server_id=other["id"])["server_id"] == other["id"]

    assert panel.groups.get("cust-1")["device_count"] == 1
    assert [d["id"] for d in panel.groups.devices("cust-1")] == [device["id"]]
    panel.groups.update("cust-1", enabled=True)
    panel.groups.renew("cust-1", days=1)
    panel.groups.reset_usage("cust-1")

    link = panel.share_links.create(device["id"])
    assert panel.share_links.get(device["id"]) == link
    panel.share_links.delete(device["id"])

    hook = panel.webhooks.create(url="https://receiver.example/hook", events=["device.deleted"])
    assert panel.webhooks.get(hook["id"])["url"] == hook["url"]
    assert panel.webhooks.update(hook["id"], enabled=False)["enabled"] is False
    assert any(w["id"] == hook["id"] for w in panel.webhooks.list())
    assert list(panel.webhooks.deliveries(hook["id"])) == []
    panel.webhooks.delete(hook["id"])

    assert list(panel.events.list(kind="device.created"))
    assert list(panel.activity.list())
    assert isinstance(panel.usage.get()["daily"], list)

    panel.groups.delete("cust-1")
    with pytest.raises(ApiError) as gone:
        panel.devices.get(device["id"])
    assert gone.value.status == 404
    panel.plans.delete(plan["id"])
    panel.servers.delete(other["id"])
