"""The processor lifecycle as data: states, actions and the transitions table (§7.1).

```
CREATED --start--> STARTED --stop--> STOPPED --start--> STARTED
STARTED --fail (retries exhausted)--> FAILED --start--> STARTED
FAILED --stop--> STOPPED                       (acknowledge a failure)
modify: CREATED, STOPPED, FAILED               (never while STARTED)
drop:   any state (a STARTED processor is stopped first)
```

Atlas answers `start` on a processor that is not stopped with an error, and so does Sluice:
every move missing from `TRANSITIONS` raises `InvalidTransition` (HTTP 409).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from service.errors import InvalidTransition
from service.stores import ProcessorState

State = ProcessorState


class Action(StrEnum):
    """What a client (or the engine) asks of a processor."""

    START = "start"
    STOP = "stop"
    MODIFY = "modify"
    FAIL = "fail"
    DROP = "drop"


#: `(state, action) -> next state`. Anything absent is an illegal transition.
TRANSITIONS: Mapping[tuple[State, Action], State] = {
    (State.CREATED, Action.START): State.STARTED,
    (State.STOPPED, Action.START): State.STARTED,
    (State.FAILED, Action.START): State.STARTED,
    (State.STARTED, Action.STOP): State.STOPPED,
    (State.FAILED, Action.STOP): State.STOPPED,
    (State.STARTED, Action.FAIL): State.FAILED,
    (State.CREATED, Action.MODIFY): State.CREATED,
    (State.STOPPED, Action.MODIFY): State.STOPPED,
    (State.FAILED, Action.MODIFY): State.FAILED,
    (State.CREATED, Action.DROP): State.CREATED,
    (State.STARTED, Action.DROP): State.STARTED,
    (State.STOPPED, Action.DROP): State.STOPPED,
    (State.FAILED, Action.DROP): State.FAILED,
}


def allowed_from(action: Action) -> list[str]:
    """The states `action` is allowed from, in declaration order."""
    return [state.value for state in State if (state, action) in TRANSITIONS]


def next_state(processor: str, current: State, action: Action) -> State:
    """The state after `action`, or `InvalidTransition` when the table does not allow it."""
    target = TRANSITIONS.get((current, action))
    if target is None:
        raise InvalidTransition(
            processor=processor,
            current=current.value,
            action=action.value,
            allowed=allowed_from(action),
        )
    return target


#: `stats.status` per state (Atlas's `created | running | error | stopping` vocabulary). A
#: `STARTED` processor that is not running yet says `starting`, or `recovering` while it is
#: resumed or restarted (`ProcessorManager._status`).
STATUS: Mapping[State, str] = {
    State.CREATED: "created",
    State.STARTED: "running",
    State.STOPPED: "stopped",
    State.FAILED: "error",
}
