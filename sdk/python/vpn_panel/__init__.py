"""The Python client of the vpn-panel API: Client(base_url=..., api_key=...), ApiError, verify_webhook."""

from ._transport import ApiError
from .client import Client
from .webhooks import WebhookVerificationError, verify_webhook

__all__ = ["ApiError", "Client", "WebhookVerificationError", "verify_webhook"]
