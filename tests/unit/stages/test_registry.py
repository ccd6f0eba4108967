"""Registry completeness (style guide G.26): modules, specs, docstrings, test files, placement."""

from __future__ import annotations

import pkgutil
from pathlib import Path

import pytest
from pydantic import ValidationError

import pipeline_stages
from pipeline_stages import KNOWN_UNSUPPORTED, REGISTRY, Placement, StageEntry
from pipeline_stages._base import WINDOW_STAGE_KEYS, StageModel

TESTS = Path(__file__).parent
ENTRIES = list(REGISTRY.values())

#: atlas-semantics.md §2 (plus the Sluice `$slidingWindow` and `$globalWindow`, placed like the
#: Atlas windows).
EXPECTED_PLACEMENT = {
    Placement.BOTH: {
        "$addFields",
        "$set",
        "$project",
        "$replaceRoot",
        "$replaceWith",
        "$unset",
        "$redact",
        "$match",
        "$unwind",
        "$validate",
        "$lookup",
        "$cachedLookup",
        "$https",
    },
    Placement.MAIN: {
        "$source",
        "$merge",
        "$emit",
        "$tumblingWindow",
        "$hoppingWindow",
        "$sessionWindow",
        "$slidingWindow",
        "$globalWindow",
        "$setStreamMeta",
        "$throttle",
    },
    Placement.WINDOW: {"$group", "$sort", "$count", "$limit"},
}
WINDOWS = {"$tumblingWindow", "$hoppingWindow", "$sessionWindow", "$slidingWindow", "$globalWindow"}


def _stage_modules() -> list[str]:
    return sorted(
        m.name for m in pkgutil.iter_modules(pipeline_stages.__path__) if not m.name.startswith("_")
    )


def test_every_public_module_is_registered() -> None:
    assert sorted(e.module.__name__.rsplit(".", 1)[1] for e in ENTRIES) == _stage_modules()


def test_placement_matches_the_spec_table() -> None:
    for placement, keys in EXPECTED_PLACEMENT.items():
        assert {k for k, e in REGISTRY.items() if e.placement is placement} == keys


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.key)
def test_entry_contract(entry: StageEntry) -> None:
    module = entry.module
    assert entry.key == module.KEY
    assert (module.__doc__ or "").strip(), f"{module.__name__} needs a docstring"
    assert entry.spec.__module__ == module.__name__
    assert entry.spec.__name__.endswith("Spec")
    assert issubclass(entry.spec, StageModel)
    assert entry.spec.model_config.get("frozen") is True
    assert entry.spec.model_config.get("extra") == "forbid"
    assert (entry.spec.__doc__ or "").strip()
    assert (TESTS / f"test_{module.__name__.rsplit('.', 1)[1]}.py").is_file()
    if entry.key in WINDOWS:
        assert not hasattr(module, "OPERATOR_NAME")
        assert entry.operator_name is None
    else:
        assert module.OPERATOR_NAME.endswith("Operator")
        assert entry.operator_name == module.OPERATOR_NAME


def test_the_layers_below_the_registry_know_the_same_window_stages() -> None:
    # The engine's plan and the MQL scan use `WINDOW_STAGE_KEYS`; the registry derives its own.
    assert pipeline_stages.WINDOW_KEYS == WINDOW_STAGE_KEYS == WINDOWS


def test_known_unsupported_is_disjoint_and_documented() -> None:
    assert {"$externalFunction", "$facet"} <= set(KNOWN_UNSUPPORTED)
    assert not set(KNOWN_UNSUPPORTED) & set(REGISTRY)
    assert all(reason for reason in KNOWN_UNSUPPORTED.values())


def test_specs_are_frozen() -> None:
    spec = pipeline_stages.parse_stage({"$limit": 3}).spec
    with pytest.raises(ValidationError):
        spec.limit = 4  # type: ignore[attr-defined]


def test_key_of_round_trips() -> None:
    for key, entry in REGISTRY.items():
        assert pipeline_stages.key_of(entry.spec.model_construct()) == key
