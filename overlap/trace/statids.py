"""Stat-name lookups of a plane (`wire.Plane.stat_ids`) and of a group of planes
(`wire.PlaneGroup.stat_names`, `.stat_ids`, keyed `plane index * GROUP_STRIDE + id`). Split
from `overlap.trace.wire` (issue 32 round 15: the 1000-line limit), which re-exports them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from overlap.trace.values import GROUP_STRIDE

# `planes`: `wire.Plane`s (not imported: wire imports this module)


class GroupStatNames:
    """`PlaneGroup.stat_names`: key -> stat name, looked up in the key's plane (no table of
    every plane's stats is built: only ref values are ever looked up)."""

    def __init__(self, planes: list[Any]):
        self.planes = planes

    def get(self, key: int, default=None):
        if key < 0:
            return default
        i, k = divmod(key, GROUP_STRIDE)
        return self.planes[i].stat_names.get(k, default) if i < len(self.planes) else default


class StatIds(Mapping):
    """`Plane.stat_ids`: stat name -> its ids (a list, in `stat_names` order), made when
    first asked. Why: the stat-metadata map holds a plane's interned string values too (a
    capture whose copies all differ in size: 100k of them), and a list per name was built
    for the dozen names the rules ask for; where no name repeats, one dict made by `zip`."""

    __slots__ = ("_names", "_one", "_many")

    def __init__(self, stat_names: dict[int, str]) -> None:
        self._names = stat_names
        self._one: dict[str, int] | None = None
        self._many: dict[str, list[int]] | None = None

    def _index(self) -> dict:
        if self._one is None and self._many is None:
            one = dict(zip(self._names.values(), self._names.keys()))
            if len(one) == len(self._names):
                self._one = one
            else:  # a name of several ids
                many: dict[str, list[int]] = defaultdict(list)
                for k, n in self._names.items():
                    many[n].append(k)
                self._many = many
        return self._one if self._one is not None else (self._many or {})

    def get(self, name, default=None):
        got = self._index().get(name)
        if got is None:
            return default
        return [got] if self._one is not None else got

    def __getitem__(self, name):
        got = self.get(name)
        if got is None:
            raise KeyError(name)
        return got

    def __iter__(self):
        return iter(self._index())

    def __len__(self) -> int:
        return len(self._index())


class GroupStatIds:
    """`PlaneGroup.stat_ids`: stat name -> the keys of every plane's ids of that name, built
    for the few names the reader asks for."""

    def __init__(self, planes: list[Any]):
        self.planes = planes
        self._cache: dict[str, list[int]] = {}
        self._named: list[tuple[int, Any]] | None = None  # the planes with stat metadata

    def get(self, name: str, default=None):
        got = self._cache.get(name)
        if got is None:
            if self._named is None:  # (looked for once, not once per name asked)
                self._named = [(i, P) for i, P in enumerate(self.planes) if P.stat_names]
            got = self._cache[name] = [i * GROUP_STRIDE + k for i, P in self._named
                                       for k in P.stat_ids.get(name, ())]
        return got or default
