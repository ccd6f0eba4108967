"""What a secret is in a connection config, and stripping secrets before they leave the service.

Secrets are stored (the engine needs them), encrypted at rest (:mod:`.secrets` seals exactly
what `map_secrets` finds), and never returned. What counts as a secret:

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
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

#: Where a secret sits: the value of a secret key, or a password inside a URI string.
SecretKind = Literal["value", "uri"]
#: Returned by a `map_secrets` callback to leave the secret out.
DROP: Final = object()

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


def map_secrets(config: Any, secret: Callable[[Any, SecretKind], Any]) -> Any:
    """A copy of `config` with every secret (see the module docstring) replaced by
    `secret(value, kind)`, or left out where that returns `DROP`.

    `kind` is `"value"` for the value of a secret key (or of a non-public `authentication`
    member) and `"uri"` for a string holding a `scheme://user:password@` password. This is the
    one definition of what a secret is: redaction drops secrets, the stores encrypt them
    (:mod:`.secrets`).
    """
    if isinstance(config, Mapping):
        out: dict[str, Any] = {}
        for key, value in config.items():
            if is_secret_key(key):
                kept = secret(value, "value")
            elif key.lower() == "authentication" and isinstance(value, Mapping):
                kept = {
                    k: map_secrets(v, secret) if k in _AUTH_PUBLIC_KEYS else secret(v, "value")
                    for k, v in value.items()
                }
                kept = {k: v for k, v in kept.items() if v is not DROP}
            else:
                kept = map_secrets(value, secret)
            if kept is not DROP:
                out[key] = kept
        return out
    if isinstance(config, list | tuple):
        items = [map_secrets(item, secret) for item in config]
        return [item for item in items if item is not DROP]
    if isinstance(config, str) and has_uri_password(config):
        return secret(config, "uri")
    return config


def has_uri_password(text: str) -> bool:
    """Whether `text` is a `scheme://user:password@...` string."""
    return _URI_PASSWORD.match(text) is not None


def _redacted(value: Any, kind: SecretKind) -> Any:
    return strip_uri_password(value) if kind == "uri" else DROP


def redact(config: Any) -> Any:
    """Returns a copy of ``config`` without secrets (see the module docstring)."""
    return map_secrets(config, _redacted)
