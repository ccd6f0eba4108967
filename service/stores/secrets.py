"""Connection secrets encrypted at rest, with a key kept apart from the store.

The stores seal every secret of a connection config before writing it and open them when
reading; what a secret is comes from :func:`.redact.map_secrets` (the definition redaction
uses, not a copy). A sealed value is a string ``sluice-sealed:v1:<Fernet token>`` whose
plaintext is the value's storage JSON, so strings, numbers and objects (a whole
``authentication`` member, a ``scheme://user:password@host`` URI) all round-trip. Fernet (the
``cryptography`` package) is AES-128-CBC with an HMAC-SHA256 over it: a wrong key or a changed
token fails to open, it never decrypts to garbage.

Where the key comes from, first match wins:

* ``SLUICE_SECRET_KEY``: one or more Fernet keys, comma-separated. The first encrypts, every
  one decrypts, so a key is rotated by putting the new one first: rows sealed with an older
  key are re-sealed with the new one when the stores open, after which the old key can go;
* a key file, by default ``<data_dir>/secret.key`` (``SLUICE_SECRET_KEY_FILE`` moves it),
  created with mode 0600 on first start. It is refused when group or others can read it.

The key never lives in the store: a copy of ``sluice.db`` (or of the MongoDB metadata database)
alone does not reveal a password. Rows written by earlier versions in plain text are sealed
when the stores open (:meth:`SecretBox.seal_config` on every stored connection); a row that
does not open with the configured keys stops the service with a message naming the key's
source, rather than failing later inside a processor.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from service.config.private_files import create_private_file, readable_by_others

from .codec import from_storage_json, to_storage_json
from .redact import SecretKind, map_secrets

#: The prefix of a sealed value.
SEALED_PREFIX = "sluice-sealed:v1:"
#: The environment variables naming the key or the key file.
KEY_VARIABLE = "SLUICE_SECRET_KEY"
KEY_FILE_VARIABLE = "SLUICE_SECRET_KEY_FILE"
#: The key file's name in the data directory.
KEY_FILE_NAME = "secret.key"


class SecretKeyError(ValueError):
    """The secret key is missing, malformed, exposed, or not the one the secrets were sealed
    with. The service refuses to start with this message."""


def is_sealed(value: Any) -> bool:
    """Whether `value` is a sealed secret."""
    return isinstance(value, str) and value.startswith(SEALED_PREFIX)


class SecretBox:
    """Seals and opens the secrets of connection configs (see the module docstring).

    Args:
        keys: Fernet keys (URL-safe base64 of 32 bytes); the first one seals.
        source: Where the keys came from, for error messages (never the keys themselves).
    """

    def __init__(self, keys: Sequence[bytes | str], *, source: str) -> None:
        if not keys:
            raise SecretKeyError(f"no secret key in {source}")
        try:
            fernets = [Fernet(key) for key in keys]
        except (ValueError, TypeError):
            raise SecretKeyError(
                f"the secret key in {source} is not a Fernet key (32 url-safe base64-encoded "
                "bytes, e.g. from `python3 -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'`)"
            ) from None
        self._primary = fernets[0]
        self._all = MultiFernet(fernets)
        self.source = source

    # ------------------------------------------------------------------ where the key is

    @classmethod
    def load(
        cls,
        *,
        data_dir: Path,
        key: str | None = None,
        key_file: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> SecretBox:
        """The box of a data directory: `key` (or `SLUICE_SECRET_KEY`), else the key file
        (`key_file`, `SLUICE_SECRET_KEY_FILE`, or `<data_dir>/secret.key`), created 0600 when
        missing.

        Raises:
            SecretKeyError: A malformed key, or a key file others can read.
        """
        env = os.environ if environ is None else environ
        key = key or env.get(KEY_VARIABLE) or None
        if key:
            keys = [part.strip() for part in key.split(",") if part.strip()]
            return cls(keys, source=f"${KEY_VARIABLE}")
        path = key_file or (Path(env[KEY_FILE_VARIABLE]) if env.get(KEY_FILE_VARIABLE) else None)
        path = (path or data_dir / KEY_FILE_NAME).expanduser().absolute()
        create_private_file(path, Fernet.generate_key() + b"\n")
        if readable_by_others(path):
            raise SecretKeyError(
                f"the secret key file {path} is readable by other users; the key may have "
                f"leaked. Fix it with 'chmod 600 {path}' (and consider rotating the key: see "
                "the Guarantees page of the documentation)"
            )
        try:
            text = path.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as error:
            raise SecretKeyError(f"cannot read the secret key file {path}: {error}") from None
        keys = [line.strip() for line in text.splitlines() if line.strip()]
        return cls(keys, source=str(path))

    # ------------------------------------------------------------------ configs

    def seal_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of `config` with every secret sealed with the first key: plaintext secrets
        are sealed, values sealed with an older key re-sealed, the others kept as they are."""
        rotated = self._map_sealed(config, self._reseal)
        return dict(map_secrets(rotated, self._seal))

    def open_config(self, config: Mapping[str, Any], *, name: str = "") -> dict[str, Any]:
        """A copy of `config` with every sealed value opened (plain values pass through).

        Raises:
            SecretKeyError: A sealed value does not open with these keys.
        """
        return dict(self._map_sealed(config, lambda value: self._open_value(value, name)))

    def needs_sealing(self, config: Mapping[str, Any]) -> bool:
        """Whether sealing `config` would change it: a plaintext secret, or a value sealed
        with a key other than the first."""
        found: list[bool] = []

        def plaintext(value: Any, kind: SecretKind) -> Any:  # noqa: ARG001 - map_secrets's shape
            found.append(not is_sealed(value))
            return value

        def older(value: str) -> str:
            found.append(not self._sealed_with_primary(value))
            return value

        map_secrets(config, plaintext)
        self._map_sealed(config, older)
        return any(found)

    # ------------------------------------------------------------------ internals

    def _seal(self, value: Any, kind: SecretKind) -> Any:  # noqa: ARG002 - map_secrets's shape
        if is_sealed(value):
            return value
        plaintext = to_storage_json({"v": value}).encode()
        return SEALED_PREFIX + self._primary.encrypt(plaintext).decode("ascii")

    def _reseal(self, value: str) -> str:
        if self._sealed_with_primary(value):
            return value
        return str(self._seal(self._open_value(value, ""), "value"))

    def _sealed_with_primary(self, value: str) -> bool:
        try:
            self._primary.decrypt(value[len(SEALED_PREFIX) :].encode("ascii"))
        except (InvalidToken, UnicodeEncodeError):
            return False
        return True

    def _open_value(self, value: str, name: str) -> Any:
        try:
            plaintext = self._all.decrypt(value[len(SEALED_PREFIX) :].encode("ascii"))
        except (InvalidToken, UnicodeEncodeError):
            where = f"connection {name!r}" if name else "a connection"
            raise SecretKeyError(
                f"the secrets of {where} do not open with the key in {self.source}: it is not "
                "the key they were sealed with. Restore that key (the key file, or "
                f"${KEY_VARIABLE}), or delete and recreate the connection"
            ) from None
        return from_storage_json(plaintext.decode())["v"]

    def _map_sealed(self, value: Any, change: Callable[[str], Any]) -> Any:
        """A copy of `value` with `change` applied to every sealed string in it."""
        if isinstance(value, Mapping):
            return {k: self._map_sealed(v, change) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._map_sealed(item, change) for item in value]
        if is_sealed(value):
            return change(value)
        return value
