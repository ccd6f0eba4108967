"""Connection bodies: a tagged union on `type` (Atlas `StreamsConnection`).

Types: `Kafka` (bootstrapServers, security, authentication, config), `Cluster` (a MongoDB
URI), `HttpIngest` (records posted to `/ingest/{name}`), `Sample` (the solar generator at
`rate` documents/s), `File` (a directory) and `Https` (an HTTP API for `$https`: `url` and
default `headers`; an `Authorization` or API-key header is a secret). Secrets (passwords, URI passwords, anything
`redact` recognises) are stored for the engine but never returned.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from service.schemas.processors import Name

_Text = Annotated[str, StringConstraints(min_length=1, max_length=4096)]

#: Strict like every request body: the OpenAPI types are the only ones accepted.
_STRICT = ConfigDict(extra="forbid", strict=True)

#: A path segment other than `.` and `..`, without `/` or NUL.
_SEGMENT = r"(?:[^/\x00.][^/\x00]*|\.[^/\x00.][^/\x00]*|\.\.[^/\x00]+)"
#: An absolute, normalised directory (no `.`, `..` or `//`; one trailing `/` allowed). A
#: pattern, not a validator, so the OpenAPI document states exactly what is accepted.
DIRECTORY_PATTERN = rf"^(?:/|(?:/{_SEGMENT})+/?)$"


class _Connection(BaseModel):
    model_config = _STRICT

    name: Name

    def stored_config(self) -> dict[str, Any]:
        """What the store keeps besides name and type (secrets included)."""
        return self.model_dump(exclude={"name", "type"}, exclude_none=True)


class KafkaSecurity(BaseModel):
    """`security`: the Kafka security protocol."""

    model_config = _STRICT

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"


class KafkaAuthentication(BaseModel):
    """`authentication`: SASL mechanism and credentials (the password is write-only)."""

    model_config = _STRICT

    mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    username: _Text | None = None
    password: _Text | None = None


class KafkaConnectionCreate(_Connection):
    """A Kafka cluster."""

    type: Literal["Kafka"]
    bootstrapServers: _Text
    security: KafkaSecurity | None = None
    authentication: KafkaAuthentication | None = None
    config: dict[str, str | int | float | bool] = Field(default_factory=dict)


class ClusterConnectionCreate(_Connection):
    """A MongoDB deployment (for `$merge`, DLQs and change streams)."""

    type: Literal["Cluster"]
    uri: Annotated[str, StringConstraints(pattern=r"^mongodb(\+srv)?://\S+$", max_length=4096)]


class HttpIngestConnectionCreate(_Connection):
    """Records posted to `POST /api/v1/ingest/{name}`."""

    type: Literal["HttpIngest"]


class SampleConnectionCreate(_Connection):
    """Atlas's generated solar stream at `rate` documents per second."""

    type: Literal["Sample"]
    rate: Annotated[float, Field(gt=0, le=100_000)] = 10


class FileConnectionCreate(_Connection):
    """A directory of files (absolute path, no `..`)."""

    type: Literal["File"]
    directory: Annotated[
        str,
        StringConstraints(max_length=4096, pattern=DIRECTORY_PATTERN),
        Field(description="An absolute, normalised path (no `.`, `..` or `//`)."),
    ]


class HttpsConnectionCreate(_Connection):
    """An HTTP(S) API that `$https` calls (`url` plus headers sent with every request)."""

    type: Literal["Https"]
    url: Annotated[str, StringConstraints(pattern=r"^https?://[^\s/?#]+\S*$", max_length=4096)]
    headers: dict[Annotated[str, StringConstraints(min_length=1, max_length=256)], _Text] = Field(
        default_factory=dict
    )


ConnectionCreate = Annotated[
    KafkaConnectionCreate
    | ClusterConnectionCreate
    | HttpIngestConnectionCreate
    | SampleConnectionCreate
    | FileConnectionCreate
    | HttpsConnectionCreate,
    Field(discriminator="type"),
]


class ConnectionPublic(BaseModel):
    """A connection as the API returns it: secrets removed, the rest of the config inline."""

    model_config = ConfigDict(extra="allow")

    name: str
    type: str
    builtIn: bool = False
    createdAt: datetime | None = None


class ConnectionsPublic(BaseModel):
    """A page of connections (built-in ones first)."""

    results: list[ConnectionPublic]
    totalCount: int


class ConnectionProbeError(BaseModel):
    """Why a connection test failed, and what to check."""

    code: str
    message: str


class ConnectionProbe(BaseModel):
    """`POST /connections/{name}:test`: whether the cluster answered, and what is on it."""

    ok: bool
    brokers: list[str] = Field(default_factory=list)
    topics: list[str] = Field(default_factory=list, description="Topics (internal ones left out).")
    error: ConnectionProbeError | None = None
    elapsedMs: int
