"""schemathesis hooks for test/fuzz/schemathesis.test.ts (loaded through SCHEMATHESIS_HOOKS).

An Idempotency-Key names one request: a client makes a new key for each new request and sends it again only
to retry that same request (docs/api.md "Idempotency"). The document can say a key is 1 to 255 characters but
not that it must be new, so the fuzzer draws the same few keys for many different requests, and the panel
rightly refuses each reuse with another body 422 `idempotency_key_reused`. A key the fuzzer drew valid is
therefore replaced by a new one, numbered in order so a run with the same seed sends the same keys; a key
drawn invalid (empty, too long) is sent as drawn, so refusing it is still checked. Replays of one key are
tested in test/http/idempotency.test.ts.
"""

import itertools

import schemathesis

_numbers = itertools.count(1)


@schemathesis.hook
def before_call(context, case, kwargs):
    headers = case.headers
    if not headers:
        return
    for name, value in list(headers.items()):
        if name.lower() == "idempotency-key" and isinstance(value, str) and 1 <= len(value) <= 255:
            headers[name] = f"fuzz-{next(_numbers)}"
