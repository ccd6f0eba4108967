"""Stripping secrets from connection configs before they leave the service.

Secrets are stored (the engine needs them) but never returned. What counts as a secret:

* any key whose lower-cased name contains ``password``, ``secret``, ``token``, ``credential``,
  ``apikey``/``api_key``/``api-key``, ``privatekey``/``private_key``/``private.key`` or
  ``jaas`` (this covers ``sasl.password``, ``ssl.key.password``, ``ssl.keystore.password``,
  ``sasl.jaas.config``, ``sasl.oauthbearer.client.secret`` and Https ``x-api-key`` headers);
* the header-like keys ``authorization``, ``proxy-authorization`` and ``cookie``;
* everything under an ``authentication`` object except ``mechanism`` and ``username``;
* the password in any ``scheme://user:password@host`` string, e.g. a MongoDB URI
  (``mongodb://u:p@h/db`` becomes ``mongodb://u@h/db``).

Matching errs on the side of removal: a harmless key that happens to contain ``token`` is
hidden too, which is cheaper than leaking a credential.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SECRET_FRAGMENTS = (
    "password",
    "secret",
    "token",
    "credential",
    "apikey",
    "api_key",
    "api-key",
    "privatekey",
    "private_key",
    "private.key",
    "jaas",
)
_SECRET_KEYS = frozenset({"authorization", "proxy-authorization", "cookie"})
_AUTH_PUBLIC_KEYS = frozenset({"mechanism", "username"})
_URI_PASSWORD = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^/@:]*):[^/@]*@")


def is_secret_key(key: str) -> bool:
    """Whether a config key names a secret (see the module docstring)."""
    lowered = key.lower()
    return lowered in _SECRET_KEYS or any(f in lowered for f in _SECRET_FRAGMENTS)


def strip_uri_password(text: str) -> str:
    """Removes the password from ``scheme://user:password@...``; other strings are unchanged."""
    return _URI_PASSWORD.sub(r"\g<head>@", text, count=1)


def redact(config: Any) -> Any:
    """Returns a copy of ``config`` without secrets (see the module docstring)."""
    if isinstance(config, Mapping):
        out: dict[str, Any] = {}
        for key, value in config.items():
            if is_secret_key(key):
                continue
            if key.lower() == "authentication" and isinstance(value, Mapping):
                out[key] = {k: redact(v) for k, v in value.items() if k in _AUTH_PUBLIC_KEYS}
            else:
                out[key] = redact(value)
        return out
    if isinstance(config, list | tuple):
        return [redact(item) for item in config]
    if isinstance(config, str):
        return strip_uri_password(config)
    return config
