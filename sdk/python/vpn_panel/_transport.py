"""Sends requests to the panel: the key, JSON bodies, errors as ApiError, bounded retries after Retry-After."""

from __future__ import annotations

import email.utils
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

# Statuses a request is sent again after, once Retry-After has passed.
_RETRIED = {429, 503}


class ApiError(Exception):
    """The one error of the SDK for a refused request: the panel's error body (docs/api.md "Errors")."""

    def __init__(self, status: int, code: str, message: str, fields: dict[str, str], request_id: str | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.fields = fields
        # The panel's X-Request-Id of the answer: quote it when asking an operator.
        self.request_id = request_id


class Transport:
    def __init__(
        self,
        base_url: str,
        api_key: str,
        max_retries: int = 5,
        max_retry_after_seconds: float = 60,
        timeout_seconds: float = 90,
    ):
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._max_retries = max_retries
        self._max_retry_after_seconds = max_retry_after_seconds
        self._timeout_seconds = timeout_seconds

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        idempotent: bool = False,
        text: bool = False,
    ) -> Any:
        """The answer's JSON (or text); None for a 204.

        `idempotent`: the operation honours Idempotency-Key (docs/api.md "Idempotency"), so the request carries a
        fresh key, the same on each retry, and is retried on 503 too. Any other POST is retried only on 429, which
        the panel answers before doing anything.
        """
        headers = {"authorization": f"Bearer {self._api_key}", "accept": "application/json"}
        data = None
        if body is not None:
            headers["content-type"] = "application/json"
            data = json.dumps(body).encode()
        if idempotent:
            headers["idempotency-key"] = str(uuid.uuid4())
        url = self._base_url + path + _query_string(query)
        attempt = 0
        while True:
            request = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=self._timeout_seconds) as response:
                    payload = response.read()
                    if response.status == 204:
                        return None
                    return payload.decode() if text else json.loads(payload)
            except urllib.error.HTTPError as refused:
                error = _api_error(refused)
                wait = _retry_after_seconds(refused.headers.get("retry-after"))
                retried = (refused.code in _RETRIED or error.code == "idempotency_key_in_use") and (
                    method != "POST" or idempotent or refused.code == 429
                )
                if not retried or attempt >= self._max_retries or wait > self._max_retry_after_seconds:
                    raise error from None
            attempt += 1
            time.sleep(wait)

    def list(self, path: str, query: Mapping[str, Any] | None = None) -> Iterator[Any]:
        """Every item of a paged list (docs/api.md "Paging"), asking the next page with after = the last id."""
        after = None
        while True:
            page_query = dict(query or {})
            if after is not None:
                page_query["after"] = after
            page = self.request("GET", path, query=page_query)
            yield from page["data"]
            if not page["has_more"] or not page["data"]:
                return
            after = page["data"][-1]["id"]


def _query_string(query: Mapping[str, Any] | None) -> str:
    pairs = [(name, _query_value(value)) for name, value in (query or {}).items() if value is not None]
    return "?" + urllib.parse.urlencode(pairs) if pairs else ""


def _query_value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _retry_after_seconds(header: str | None) -> float:
    """Seconds a Retry-After asks for (delta-seconds or an HTTP date); 1 when absent or unreadable."""
    if header is None:
        return 1
    if header.strip().isdigit():
        return float(header)
    try:
        when = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return 1
    return max(0.0, when.timestamp() - time.time())


def _api_error(refused: urllib.error.HTTPError) -> ApiError:
    request_id = refused.headers.get("x-request-id")
    text = refused.read().decode(errors="replace")
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        error = None
    if not isinstance(error, dict):
        # Not the panel's error body (a proxy's page): the status says what there is to say.
        return ApiError(refused.code, f"http_{refused.code}", text[:200], {}, request_id)
    fields = error.get("fields")
    return ApiError(
        refused.code,
        str(error.get("code", f"http_{refused.code}")),
        str(error.get("message", "")),
        {str(k): str(v) for k, v in fields.items()} if isinstance(fields, dict) else {},
        request_id,
    )
