"""Plain records for `overlap.hlo` (`Record`, `FrozenRecord`): what `dataclasses.dataclass`
gave the HLO modules' records, written out once (tests/hlo/test_trace_ops_records.py and
test_program_records.py check each against a dataclass of the same fields)."""

from __future__ import annotations

import dataclasses
from typing import Any


class Record:
    """What `dataclasses.dataclass` gives these records (`__init__` by field, `__repr__`,
    `__eq__` of the same class on the fields' tuple; `FrozenRecord`: assignment refused, hashed
    by the compared fields), written out once here: the decorator generates and compiles each
    method per class when the module loads (~0.5 ms a class, on every report of a capture
    with HloProtos, issue 32). The records of `overlap.hlo.trace_ops` and `overlap.hlo.program`.

    `_fields`: every field, in order (`repr`); `_compared`: the fields equality and a frozen
    record's hash read (a dataclass's `compare=False` fields left out), None for all."""

    __slots__ = ()  # (a subclass without slots of its own has its `__dict__`)
    _fields: tuple[str, ...] = ()
    _compared: tuple[str, ...] | None = None

    def _values(self) -> tuple:
        return tuple(getattr(self, f) for f in
                     (self._fields if self._compared is None else self._compared))

    def __repr__(self) -> str:
        return (f"{type(self).__qualname__}("
                + ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields) + ")")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    def replaced(self, **changes: Any) -> Any:
        """This record with `changes` (`dataclasses.replace`: a new record of its class,
        every other field as it is; a name that is no field refused)."""
        if not set(changes) <= set(self._fields):
            raise TypeError(f"{type(self).__qualname__} has no field {sorted(changes)!r}")
        return self.__class__(**{f: changes[f] if f in changes else getattr(self, f)
                                 for f in self._fields})

    __hash__ = None  # type: ignore[assignment]  # (mutable records, as a dataclass's)


class FrozenRecord(Record):
    """A `Record` as `dataclass(frozen=True)`: fields set once by `__init__` (through
    `__dict__`), assignment and deletion refused, hashed by the compared fields."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._values())
