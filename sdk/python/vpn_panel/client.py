"""A client of one panel with one API key, one namespace per resource (the same as the TypeScript and Go SDKs)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ._transport import Transport

if TYPE_CHECKING:
    from . import models


def _at(value: int | str) -> str:
    return urllib.parse.quote(str(value), safe="")


class _Namespace:
    def __init__(self, transport: Transport):
        self._t = transport


class _Resource(_Namespace):
    """What most resources have: list, get, create, update and delete under one path."""

    _path = ""
    # Its POST honours Idempotency-Key, so it carries one and is retried on 503 too.
    _idempotent_create = False

    def list(self, **query: Any) -> Iterator[Any]:
        return self._t.list(self._path, query)

    def get(self, id: int) -> Any:
        return self._t.request("GET", f"{self._path}/{_at(id)}")

    def create(self, **body: Any) -> Any:
        return self._t.request("POST", self._path, body=body, idempotent=self._idempotent_create)

    def update(self, id: int, **body: Any) -> Any:
        return self._t.request("PATCH", f"{self._path}/{_at(id)}", body=body)

    def delete(self, id: int) -> None:
        self._t.request("DELETE", f"{self._path}/{_at(id)}")


class Servers(_Resource):
    _path = "/servers"
    _idempotent_create = True

    def delete(self, id: int, force: bool | None = None) -> None:
        """force=True deletes its devices with it."""
        self._t.request("DELETE", f"/servers/{_at(id)}", query={"force": force})


class Nodes(_Namespace):
    def list(self) -> Iterator[dict[str, Any]]:
        return self._t.list("/nodes")

    def get(self, id: int) -> dict[str, Any]:
        return self._t.request("GET", f"/nodes/{_at(id)}")


class Devices(_Resource):
    _path = "/devices"
    _idempotent_create = True

    def usage(self, id: int) -> models.UsageReport:
        return self._t.request("GET", f"/devices/{_at(id)}/usage")

    def config(self, id: int, **query: Any) -> str:
        """The client config (wg-quick text)."""
        return self._t.request("GET", f"/devices/{_at(id)}/config", query=query, text=True)

    def move(self, id: int, **body: Any) -> models.Device:
        return self._t.request("POST", f"/devices/{_at(id)}/move", body=body, idempotent=True)

    def reset_usage(self, id: int) -> models.Device:
        return self._t.request("POST", f"/devices/{_at(id)}/usage/reset", idempotent=True)

    def renew(self, id: int, **body: Any) -> models.Device:
        return self._t.request("POST", f"/devices/{_at(id)}/renew", body=body, idempotent=True)

    def top_up(self, id: int, **body: Any) -> models.Device:
        return self._t.request("POST", f"/devices/{_at(id)}/top-up", body=body, idempotent=True)


class Groups(_Namespace):
    """The devices of one external_id (a customer)."""

    def get(self, external_id: str) -> models.Group:
        return self._t.request("GET", f"/groups/{_at(external_id)}")

    def devices(self, external_id: str) -> Iterator[models.Device]:
        return self._t.list("/devices", {"external_id": external_id})

    def update(self, external_id: str, **body: Any) -> models.Group:
        return self._t.request("PATCH", f"/groups/{_at(external_id)}", body=body)

    def delete(self, external_id: str) -> None:
        self._t.request("DELETE", f"/groups/{_at(external_id)}")

    def reset_usage(self, external_id: str) -> models.Group:
        return self._t.request("POST", f"/groups/{_at(external_id)}/usage/reset", idempotent=True)

    def renew(self, external_id: str, **body: Any) -> models.Group:
        return self._t.request("POST", f"/groups/{_at(external_id)}/renew", body=body, idempotent=True)


class Plans(_Resource):
    _path = "/plans"


class ShareLinks(_Namespace):
    """A device's share link: a page that shows its config to whoever has the link."""

    def create(self, device_id: int, **body: Any) -> dict[str, Any]:
        return self._t.request("POST", f"/devices/{_at(device_id)}/share", body=body)

    def get(self, device_id: int) -> dict[str, Any]:
        return self._t.request("GET", f"/devices/{_at(device_id)}/share")

    def delete(self, device_id: int) -> None:
        self._t.request("DELETE", f"/devices/{_at(device_id)}/share")


class Webhooks(_Resource):
    """create answers the webhook with its signing secret, shown only then: keep it for verify_webhook."""

    _path = "/webhooks"

    def deliveries(self, id: int, **query: Any) -> Iterator[models.WebhookDelivery]:
        return self._t.list(f"/webhooks/{_at(id)}/deliveries", query)

    def ping(self, id: int) -> models.WebhookDelivery:
        return self._t.request("POST", f"/webhooks/{_at(id)}/ping")


class Events(_Namespace):
    def list(self, **query: Any) -> Iterator[models.Event]:
        return self._t.list("/events", query)


class Activity(_Namespace):
    def list(self, **query: Any) -> Iterator[models.ActivityEntry]:
        return self._t.list("/activity", query)


class Usage(_Namespace):
    def get(self, **query: Any) -> models.FleetUsage:
        """The whole fleet's usage by day."""
        return self._t.request("GET", "/usage", query=query)


class Client:
    """Lists are generators over every page; a refused request raises ApiError; 429 and 503 are retried after
    Retry-After, and each POST that may be retried carries its own Idempotency-Key."""

    def __init__(self, base_url: str, api_key: str, max_retries: int = 5, max_retry_after_seconds: float = 60):
        transport = Transport(base_url, api_key, max_retries, max_retry_after_seconds)
        self.servers = Servers(transport)
        self.nodes = Nodes(transport)
        self.devices = Devices(transport)
        self.groups = Groups(transport)
        self.plans = Plans(transport)
        self.share_links = ShareLinks(transport)
        self.webhooks = Webhooks(transport)
        self.events = Events(transport)
        self.activity = Activity(transport)
        self.usage = Usage(transport)
