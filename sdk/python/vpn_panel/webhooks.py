"""Standard Webhooks verification of the panel's deliveries."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .models import Event

# How far a delivery's webhook-timestamp may be from now (Standard Webhooks' default): older replays fail.
TOLERANCE_SECONDS = 5 * 60


class WebhookVerificationError(Exception):
    """A delivery that is not the panel's: bad or missing signature, or a timestamp too far from now."""


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name and value:
            return value
    raise WebhookVerificationError(f"missing {name} header")


def verify_webhook(
    secret: str, headers: Mapping[str, str], body: str | bytes, now_seconds: float | None = None
) -> Event:
    """The event of a webhook delivery, after checking its signature and timestamp; raises otherwise.

    The signature (webhook-signature) is "v1," + base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>"
    keyed by the secret after "whsec_"; the timestamp must be within 5 minutes of now. `body` is the raw request
    body as received: a re-serialized one no longer matches.
    """
    message_id = _header(headers, "webhook-id")
    timestamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    if not timestamp.isdigit():
        raise WebhookVerificationError("webhook-timestamp is not a number")
    now = time.time() if now_seconds is None else now_seconds
    if abs(now - int(timestamp)) > TOLERANCE_SECONDS:
        raise WebhookVerificationError("webhook-timestamp is too far from now")
    text = body.decode() if isinstance(body, bytes) else body
    key = base64.b64decode(secret.removeprefix("whsec_"))
    expected = hmac.new(key, f"{message_id}.{timestamp}.{text}".encode(), hashlib.sha256).digest()
    for signature in signatures.split(" "):
        version, _, mac = signature.partition(",")
        if version != "v1":
            continue
        try:
            given = base64.b64decode(mac, validate=True)
        except ValueError:
            continue
        if hmac.compare_digest(given, expected):
            return json.loads(text)
    raise WebhookVerificationError("no valid signature")
