"""Extensible vocabularies: event kinds, end reasons, triggers, hosted activity names.

A value is registered by the module that produces it, together with that producer's name, so a
test can check both directions: every registered value has a producer that emits it, and every
value a producer emits is registered. Registration is idempotent per (value, producer).
"""

from __future__ import annotations

from collections.abc import Iterator


class UnregisteredValue(ValueError):
    """A producer emitted a value its vocabulary does not know."""


class Registry:
    def __init__(self, name: str) -> None:
        self.name = name
        self._producers: dict[str, set[str]] = {}

    def register(self, value: str, *, producer: str) -> str:
        if not value or not isinstance(value, str):
            raise ValueError(f"{self.name}: a value must be a non-empty string")
        self._producers.setdefault(value, set()).add(producer)
        return value

    def check(self, value: str) -> str:
        if value not in self._producers:
            raise UnregisteredValue(f"{self.name}: {value!r} is not registered")
        return value

    def producers(self, value: str) -> frozenset[str]:
        return frozenset(self._producers.get(value, ()))

    def __contains__(self, value: object) -> bool:
        return value in self._producers

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._producers))

    def __len__(self) -> int:
        return len(self._producers)


EVENT_KINDS = Registry("event kind")
END_REASONS = Registry("end reason")
TRIGGERS = Registry("trigger")
ACTIVITY_NAMES = Registry("hosted activity name")

ALL = {
    "event_kinds": EVENT_KINDS,
    "end_reasons": END_REASONS,
    "triggers": TRIGGERS,
    "activity_names": ACTIVITY_NAMES,
}
