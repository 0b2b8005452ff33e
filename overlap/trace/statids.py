"""Stat-name lookups of a plane (`wire.Plane.stat_ids`; `LazyStatNames`, a large stat-metadata
map left in the file's bytes) and of a group of planes (`groups.PlaneGroup.stat_names`,
`.stat_ids`, keyed `plane index * GROUP_STRIDE + id`). Split from `overlap.trace.wire` (issue
32 round 15: the 1000-line limit), which re-exports them."""

from __future__ import annotations

import numbers
from collections import defaultdict
from collections.abc import Iterator, Mapping
from itertools import compress
from typing import Any

import numpy as np

from overlap.trace.values import GROUP_STRIDE, object_array

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

    def names_of(self, keys: np.ndarray) -> np.ndarray:
        """`get(key, "")` of each of `keys` (integers), as an object array. Each plane's map
        read once, the keys split by numpy, not a call and a `divmod` each (a ref per event
        of 10k GPU planes, each plane's own keys: ~30k calls a stat)."""
        keys = np.asarray(keys)
        if not len(keys):
            return np.zeros(0, object)
        if keys.dtype.kind not in "iu" or (keys.dtype == np.uint64 and int(keys.max()) >> 63):
            # (not int64-safe: one at a time, as `get`)
            return object_array([self.get(int(u), "") for u in keys.tolist()])
        keys = keys.astype(np.int64, copy=False)
        n = len(self.planes)
        at, k = np.divmod(keys, GROUP_STRIDE)
        ok = (keys >= 0) & (at < n)
        maps: dict[int, Any] = {}  # plane index -> its map (each read once)
        planes = self.planes
        out = []
        for i, j, good in zip(at.tolist(), k.tolist(), ok.tolist()):
            if not good:
                out.append("")
                continue
            m = maps.get(i)
            if m is None:
                m = maps[i] = planes[i].stat_names
            out.append(m.get(j, ""))
        return object_array(out)


class LazyStatNames(Mapping):
    """A plane's stat metadata, id -> name, in upb's iteration order, whose names stay in the
    file's bytes until asked for (each then decoded once and kept): where the scanner read
    every entry plainly (valid UTF-8 checked), the ids are dense and there are many of them
    (`_scan._stat_names`, `wire.LAZY_STAT_NAMES`).

    Why: the map holds a plane's interned string values too, and a capture whose copies all
    differ in size interns a details text per copy: as a dict, ~180 bytes an entry (two
    planes of 100k: 36 MiB, a third of that capture's peak), while the rules read the
    names of a dozen stats and the details texts of one plane. `spans`: (id, name start,
    name end) per entry as written (an id written twice: its last entry, as upb keeps it),
    int64 of shape (entries, 3), or int32 of three rows (ids, starts, ends) whose ids ascend
    (each once); `buf`: the file's bytes (kept alive by this map)."""

    __slots__ = ("_buf", "_keys", "_ns", "_ne", "_pos", "_names", "_have")

    def __init__(self, buf: np.ndarray, spans: np.ndarray) -> None:
        self._buf = buf
        # Ids, rows and name spans as int32 where the file's bytes allow (dense ids are at
        # most one more than the entries), and each name's object made only when one is
        # asked for. Why: a plane whose copies' details are a million refs to stat names
        # (CUPTI's form) held 41 MB of int64 and empty object tables here beside the file.
        if spans.dtype == np.int32:  # (the split's three rows: ids ascending, each once)
            self._keys, self._ns, self._ne = spans[0], spans[1], spans[2]
            n = len(self._keys)
            it: Any = np.int32
        else:
            k = spans[:, 0]
            if len(k) > 1 and not bool((k[1:] > k[:-1]).all()):
                # upb iterates dense ids ascending; of an id written twice, the last entry
                order = np.argsort(k, kind="stable")
                sk = k[order]
                spans = spans[order[np.flatnonzero(np.r_[sk[1:] != sk[:-1], True])]]
            n = len(spans)
            it = np.int32 if len(buf) < 1 << 31 and n < (1 << 31) - 1 else np.int64
            self._keys = spans[:, 0].astype(it)
            self._ns, self._ne = spans[:, 1].astype(it), spans[:, 2].astype(it)
        # id -> row (dense ids: at most one more slot than entries)
        self._pos: np.ndarray = np.full(int(self._keys[-1]) + 1 if n else 0, -1, it)
        self._pos[self._keys] = np.arange(n, dtype=it)
        self._names: np.ndarray | None = None  # (the decoded names, `_decoded`)
        self._have: np.ndarray | None = None

    def _decoded(self) -> tuple[np.ndarray, np.ndarray]:
        """(per row its name or None, per row whether it is decoded), made when first asked."""
        if self._names is None or self._have is None:
            self._names = np.full(len(self._keys), None, object)
            self._have = np.zeros(len(self._keys), bool)
        return self._names, self._have

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[int]:
        return iter(self._keys.tolist())

    def _row(self, k: Any) -> int:
        """The row of id `k`, -1 where it has none (a key a dict would match to an id: a
        bool, a numpy integer, an integral float, as equal keys)."""
        if type(k) is not int:
            if isinstance(k, numbers.Integral):
                k = int(k)
            elif isinstance(k, numbers.Real) and float(k).is_integer():  # (not inf, nan)
                k = int(float(k))
            else:
                return -1
        return int(self._pos[k]) if 0 <= k < len(self._pos) else -1

    def __contains__(self, k: object) -> bool:
        return self._row(k) >= 0

    def __getitem__(self, k: Any) -> str:
        r = self._row(k)
        if r < 0:
            raise KeyError(k)
        names, have = self._decoded()
        if not have[r]:
            mv = memoryview(self._buf)  # type: ignore[arg-type]  # an ndarray is a buffer
            names[r] = bytes(mv[self._ns[r]:self._ne[r]]).decode("utf-8")
            have[r] = True
        return names[r]

    def get(self, k: Any, default: Any = None) -> Any:
        return self[k] if self._row(k) >= 0 else default

    def key_array(self) -> np.ndarray:
        """The ids, ascending, as an array (read-only: the map's own)."""
        return self._keys

    def spans(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """(the names' bytes, id -> row (-1: none), each row's name start and end there, int32):
        what `_scan.memcpy_details_at` reads refs' names from, none decoded; None where they
        are int64 (a file of 2 GiB or more)."""
        if self._pos.dtype != np.int32:
            return None
        return self._buf, self._pos, self._ns, self._ne

    def names_of(self, ids: np.ndarray, default: str = "") -> np.ndarray:
        """The names of integer `ids` (`default` where an id has none), as an object array:
        the names not yet asked for decoded at once (`_scan.span_texts`)."""
        ids = np.asarray(ids)
        out = np.full(len(ids), default, object)
        ok = (ids >= 0) & (ids < len(self._pos))
        at = np.flatnonzero(ok)
        rows = self._pos[ids[at].astype(np.int64)]
        found = rows >= 0
        at, rows = at[found], rows[found]
        names, have = self._decoded()
        new = rows[~have[rows]]
        if len(new) > 1 and not bool((new[1:] > new[:-1]).all()):  # (ids asked in order,
            new = np.unique(new)  # as `_stat_objects` asks them: each once already)
        if new.size:
            from overlap.trace import _scan  # (a map made by the scanner: it is built)

            names[new] = object_array(_scan.span_texts(
                self._buf, self._ns[new].astype(np.int64), self._ne[new].astype(np.int64)))
            have[new] = True
        out[at] = names[rows]
        return out

    def ids_of(self, name: str) -> list[int]:
        """The ids whose name is `name`, in map order, found in the names' bytes (none
        decoded): those of its length, narrowed a byte at a time."""
        if not isinstance(name, str):
            return []
        want = name.encode("utf-8", "surrogatepass")  # (a lone surrogate matches no name)
        rows = np.flatnonzero(self._ne - self._ns == len(want))
        for j, c in enumerate(want):
            if not rows.size:
                break
            rows = rows[self._buf[self._ns[rows] + j] == c]
        return self._keys[rows].tolist()


class StatIds(Mapping):
    """`Plane.stat_ids`: stat name -> its ids (a list, in `stat_names` order), made when
    first asked. Why: the stat-metadata map holds a plane's interned string values too (a
    capture whose copies all differ in size: 100k of them), and a list per name was built
    for the dozen names the rules ask for; where no name repeats, one dict made by `zip`."""

    __slots__ = ("_names", "_one", "_many", "_asked")

    def __init__(self, stat_names: Mapping[int, str]) -> None:
        self._names = stat_names
        self._one: dict[str, int] | None = None
        self._many: dict[str, list[int]] | None = None
        # a `LazyStatNames`: each name asked for found in its bytes, not every name decoded
        self._asked: dict[str, list[int]] | None = \
            {} if isinstance(stat_names, LazyStatNames) else None

    def _index(self) -> dict:
        if self._one is None and self._many is None:
            names = self._names
            values = names.names_of(names._keys).tolist() \
                if isinstance(names, LazyStatNames) else names.values()
            one = dict(zip(values, names.keys()))
            if len(one) == len(self._names):
                self._one = one
            else:  # a name of several ids
                many: dict[str, list[int]] = defaultdict(list)
                for n, k in zip(values, names.keys()):
                    many[n].append(k)
                self._many = many
        return self._one if self._one is not None else (self._many or {})

    def get(self, name, default=None):
        if self._asked is not None and self._one is None and self._many is None:
            got = self._asked.get(name)
            if got is None:
                got = self._asked[name] = self._names.ids_of(name)
            return got or default
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


class StatKeys(list):
    """A group's keys of one stat name (`GroupStatIds`), a list as before, with the frozenset
    `LineEvents` files its answers under made once (`key`, `ids_key`). Why: the reader asks
    a group's line for the same stat a few hundred times (codes, presence, values); each ask
    made a frozenset of every plane's key (10k planes: 10k keys), and the dicts it looked in
    held an equal but other frozenset, so each lookup compared the two element by element:
    ~14% of a report of 10k GPU planes' instructions. The same object each time: built
    once, found by identity. Not to be changed once `key` is read (`GroupStatIds` fills it,
    then hands it out)."""

    __slots__ = ("_key",)

    def __init__(self, keys=()) -> None:
        super().__init__(keys)
        self._key: frozenset | None = None

    @property
    def key(self) -> frozenset:
        k = self._key
        if k is None:
            k = self._key = frozenset(self)  # (ints, as `GroupStatIds` makes them)
        return k


def ids_key(sids) -> frozenset:
    """The frozenset of the stat ids (or a group's keys) `sids`, as `LineEvents` keys its
    answers: a `StatKeys`' own, else made here."""
    return sids.key if type(sids) is StatKeys else frozenset(map(int, sids))


class GroupStatIds:
    """`PlaneGroup.stat_ids`: stat name -> the keys of every plane's ids of that name (plane
    by plane, each plane's in its map's order), built for the few names the reader asks for.

    `asked`: the names the caller will ask for; the first of them asked finds all of them
    in one pass over the planes' maps, where every map is a dict (the split's), instead of
    a name index per plane asked each name (10k planes of ~20 stat names: ~50 ms and
    ~6 MiB of indexes, for five names)."""

    def __init__(self, planes: list[Any], asked: tuple[str, ...] = ()):
        self.planes = planes
        self._asked = asked
        self._cache: dict[str, StatKeys] = {}
        self._named: list[tuple[int, Any]] | None = None  # the planes with stat metadata

    def get(self, name: str, default=None):
        got = self._cache.get(name)
        if got is None and name in self._asked:
            self._find_asked()
            got = self._cache.get(name)
        if got is None:
            if self._named is None:  # (looked for once, not once per name asked)
                self._named = [(i, P) for i, P in enumerate(self.planes) if P.stat_names]
            got = self._cache[name] = StatKeys(i * GROUP_STRIDE + k for i, P in self._named
                                               for k in P.stat_ids.get(name, ()))
        return got or default

    def _find_asked(self) -> None:
        """The keys of every `asked` name, in one pass (where a plane's map is not a dict,
        nothing: each name is then found plane by plane)."""
        found: dict[str, StatKeys] = {n: StatKeys() for n in self._asked}
        self._asked = ()
        asked = found.__contains__
        for i, P in enumerate(self.planes):
            names = P.stat_names
            if not names:
                continue
            if type(names) is not dict:
                return
            base = i * GROUP_STRIDE
            # (the entries whose name is asked picked in C, `compress`: a few of a GPU
            # plane's ~20, 10k planes)
            for k, n in compress(names.items(), map(asked, names.values())):
                found[n].append(base + k)
        self._cache.update(found)
