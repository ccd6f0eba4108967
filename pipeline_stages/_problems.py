"""Pydantic errors ↔ user-facing problems.

Two directions live here:

* inside validation, `ErrorList` gathers errors at chosen locations (relative to the model
  being validated) and raises them as one `ValidationError`; pydantic then prefixes them with
  the enclosing location, so a spec can point at `/pipeline/2/$project/a/b` without knowing
  where it sits in the pipeline;
* after validation, `problems_from_validation_error` turns pydantic's error list into
  `Problem`s with JSON-pointer paths and messages that say what was received.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, TypeVar, get_args

from pydantic import ValidationError, ValidationInfo, model_validator
from pydantic_core import InitErrorDetails
from pydantic_core.core_schema import ErrorType

from pipeline_stages._base import (
    Problem,
    ProblemCode,
    StageModel,
    custom_error,
    describe,
    join_path,
)

#: Error types pydantic-core knows; any other type string is one of ours.
_KNOWN_TYPES = frozenset(get_args(ErrorType))

Loc = tuple[str | int, ...]
T = TypeVar("T")


def _is_custom(error: Mapping[str, Any]) -> bool:
    ctx = error.get("ctx") or {}
    return "message" in ctx and ctx["message"] == error.get("msg")


def _detail(error: Mapping[str, Any], prefix: Loc) -> InitErrorDetails:
    loc = prefix + tuple(error["loc"])
    if _is_custom(error) or error["type"] not in _KNOWN_TYPES:
        return InitErrorDetails(
            type=custom_error(error["type"], error["msg"]), loc=loc, input=error["input"]
        )
    if "ctx" in error:
        return InitErrorDetails(type=error["type"], loc=loc, input=error["input"], ctx=error["ctx"])
    return InitErrorDetails(type=error["type"], loc=loc, input=error["input"])


@dataclass
class ErrorList:
    """Errors gathered during one validator run, raised together as a `ValidationError`."""

    details: list[InitErrorDetails] = field(default_factory=list)

    def add(self, loc: Loc, code: str, message: str, value: Any) -> None:
        """Record an error at `loc` (relative to the model being validated)."""
        self.details.append(
            InitErrorDetails(type=custom_error(code, message), loc=loc, input=value)
        )

    def absorb(self, exc: ValidationError, *prefix: str | int) -> None:
        """Record every error of `exc`, moved under `prefix`."""
        self.details.extend(_detail(e, prefix) for e in exc.errors(include_url=False))

    def check(self, validate: Callable[[Any], T], value: Any, *prefix: str | int) -> T | None:
        """Run `validate(value)`; on failure record its errors under `prefix` and return None."""
        try:
            return validate(value)
        except ValidationError as exc:
            self.absorb(exc, *prefix)
            return None

    def __bool__(self) -> bool:
        return bool(self.details)

    def raise_if_any(self, title: str) -> None:
        """Raise all recorded errors at once."""
        if self.details:
            raise ValidationError.from_exception_data(title, self.details)


class CheckedSpec(StageModel):
    """A spec whose cross-field rules and refused options are checked in the same pass as fields.

    Pydantic skips `mode="after"` model validators as soon as one field fails, so a rule such
    as "processingTime forbids allowedLateness" would go unreported next to a field error.
    Here those rules run on the raw input (keys normalised to their Atlas aliases) and their
    errors are raised together with the field errors.

    Subclasses list documented Atlas options they refuse in `UNSUPPORTED_OPTIONS` (Atlas key →
    reason; `unsupported_option` rather than `extra_forbidden`) and put presence-based rules in
    `_check_raw`.
    """

    UNSUPPORTED_OPTIONS: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def _check_raw(cls, raw: Mapping[str, Any], errors: ErrorList) -> None:
        """Record cross-field problems of the raw input (keys are Atlas aliases)."""

    @classmethod
    def _by_alias(cls, value: Mapping[str, Any]) -> dict[str, Any]:
        aliases = {name: info.alias or name for name, info in cls.model_fields.items()}
        return {aliases.get(key, key): item for key, item in value.items()}

    @model_validator(mode="before")
    @classmethod
    def _check_all(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, dict) or isinstance(value, _Checked):
            return value
        errors = ErrorList()
        for key in value:
            if key in cls.UNSUPPORTED_OPTIONS:
                reason = cls.UNSUPPORTED_OPTIONS[key]
                errors.add(
                    (key,),
                    ProblemCode.UNSUPPORTED_OPTION,
                    f"'{key}' is not supported: {reason}",
                    value[key],
                )
        cls._check_raw(value if _is_atlas(info.context) else cls._by_alias(value), errors)
        rest = _Checked((k, v) for k, v in value.items() if k not in cls.UNSUPPORTED_OPTIONS)
        if errors:
            # Validate the fields now, with the caller's flags, so their errors join ours.
            # (A wrap validator would do this more simply, but pydantic-core drops the
            # runtime `by_name=False` inside a wrap handler.)
            errors.check(partial(_validate_fields, cls, context=info.context), rest)
            errors.raise_if_any(cls.__name__)
        return rest


#: Validation context of Atlas JSON input: field names (snake_case) are not accepted.
ATLAS_CONTEXT: Mapping[str, Any] = {"atlas_json": True}


def _is_atlas(context: Any) -> bool:
    return isinstance(context, Mapping) and bool(context.get("atlas_json"))


def _validate_fields(cls: type[StageModel], value: Any, *, context: Any) -> Any:
    if _is_atlas(context):
        return cls.__pydantic_validator__.validate_python(
            value, by_alias=True, by_name=False, context=context
        )
    return cls.__pydantic_validator__.validate_python(value, context=context)


class _Checked(dict[str, Any]):
    """Raw input whose cross-field rules already ran.

    Pydantic applies a model validator twice to the recursive window models (once at their
    schema definition, once at the reference), so the second run must not report the same
    problems again.
    """


def given(raw: Mapping[str, Any], key: str) -> bool:
    """Whether the raw input sets `key` to something other than null."""
    return raw.get(key) is not None


# --------------------------------------------------------------------------- to problems


def _is_internal_segment(segment: str | int) -> bool:
    # pydantic names union members and validator wrappers in `loc`; they are not user keys.
    if not isinstance(segment, str):
        return False
    return segment == "[key]" or segment.startswith(("function-", "tagged-union[", "literal["))


def loc_to_path(base: str, loc: Loc) -> str:
    """The JSON pointer of a pydantic `loc` under `base` (list indices kept)."""
    return join_path(base, *(s for s in loc if not _is_internal_segment(s)))


def _message(error: Mapping[str, Any]) -> str:
    if _is_custom(error) or error["type"] not in _KNOWN_TYPES:
        return str(error["msg"])
    loc = [s for s in error["loc"] if not _is_internal_segment(s)]
    name = f"'{loc[-1]}'" if loc else "value"
    if error["type"] == "missing":
        return f"Required field {name} is missing"
    if error["type"] == "extra_forbidden":
        return f"Unknown field {name}: it is not a field of this object"
    if error["type"] == "value_error":
        # Raised by our own validators, whose messages already name the received value.
        return str(error["msg"]).removeprefix("Value error, ")
    return f"{error['msg']}, got {describe(error['input'])}"


def problems_from_validation_error(exc: ValidationError, *, base: str) -> list[Problem]:
    """Convert pydantic's errors to `Problem`s whose paths are JSON pointers under `base`."""
    return [
        Problem(code=str(e["type"]), path=loc_to_path(base, tuple(e["loc"])), message=_message(e))
        for e in exc.errors(include_url=False)
    ]
