# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# cython: cdivision=True
"""The compiled XSpace scanner: the file's bytes -> the columns the reader's rules use.

Why compiled: walking protobuf with numpy costs one array pass per field per record (a dozen
passes per event on a GPU kernel line), and each pass is memory-bound over tens of MB; a
Python loop costs ~1 us per field. This walks each record once, in C, and returns numpy
arrays: no Python object per event or per stat.

The entry points, all over a file's bytes (`data`, a buffer of `n` bytes plus padding):

* `split_space(data, n, strip_meta, lazy_min, line_prefixes)`: the XSpace skeleton for upb
  (every plane without its lines, and without its event_metadata entries where
  `strip_meta(plane name)` is true), each line's header fields and where its payload lies,
  with its event count, its name and its name's code (`_LineRecs`: the distinct names by
  their bytes, with marks by `line_prefixes` and `(`), where each plane's event_metadata map
  entries lie, and a stripped plane's entries decoded as `decode_meta` gives them (where
  `strip_meta` answers 2: checked, not kept).
* `decode_events(data, starts, ends, total, skip, wanted, plane_of, stride)`: the events of
  one or more lines (their payloads [starts[i], ends[i])) in one pass: per event its
  metadata_id, offset_ps, duration_ps and whether it is aggregated (`num_occurrences`, no
  position), and its stats whose metadata id is in `wanted` (all when None) as typed
  records: (event index, stat id, value field number, integer value / double bits / string
  length, string position). Events whose metadata id is in `skip` keep no stats.
  With `groups` (sets of stat ids, one set per stat name a rule reads), also per group and
  event the *first* stat of the set, as a code into the group's distinct values (-1: none),
  each distinct value kept once (kind, integer or double bits or string length, where the
  first such string lies). Why: the rules read "the event's first stat of a name", and
  most values repeat (a few hundred kernel names over a million launches), so keeping a
  record per stat (29 bytes) and choosing the first ones later costs ~140 MB and three array
  passes per million events, and a Python object per record; here it costs 4 bytes per
  event and group, and one object per distinct value. Values are equal when their kinds
  and integers are, or, for strings and bytes, their contents (hashed, then compared); a
  ref in a grouped read is interned as its plane's key (`plane * stride + id`, -1 outside).
* `decode_events_at(data, starts, ends, at, wanted)`: the stats of a few events of those
  lines, by index, the others stepped over by length.
* `decode_meta(data, starts, ends)`: event_metadata map entries: key, name and display-name
  spans and stat records per entry; `ok` False where upb would read the entry differently
  than a table can say (a field other than the key and the value, a value written twice).
* `text_facts(buf, fs, fe)`: what the TPU copy rules look for in HLO texts, in place in the
  table's buffer (overlap.trace.tpu's `_text_facts`, whose numpy rule it equals).
* `str_codes(values, sort)`: `arrays.factorize` of a list of str (overlap.trace.strcodes).
* `memcpy_details(values)`: what `gpu._memcpy_facts` reads from CUPTI/ROCm `memcpy_details`
  texts, for plain ASCII ones.

Semantics are upb's for every encoding upb accepts (fields in any order, repeated scalars:
the last wins; the `data` oneof of XEvent and the value oneof of XStat: the last field
written wins; fields of the wrong wire type and unknown fields, groups included, skipped).
The rule for damaged bytes is overlap.trace.wire's, and upb's limits are held here: a tag or a
length prefix longer than 5 bytes, a field number of 2**29 or more, groups nested beyond 100
levels counted from the XSpace (`DEPTH_LIMIT`, D_*), lengths or wire types that do not add up:
`Corrupt`, in every part of the file (`check_events` walks the lines no rule decodes, and
`_plane` the event metadata it strips from the skeleton). Invalid UTF-8 in a string field is
not refused: the text is read with replacement, and each field as written last is counted
(`_line`, `decode_events`' `bad`, `check_events`; `_plane`'s count is each copy written, which
wire recounts as upb reads the map). Property tests compare every answer with upb
(tests/trace/test_scanner.py, test_meta_table.py, test_differential.py).
"""

import sys

import numpy as np

cimport cython
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memchr, memcmp, memcpy, memset
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_FromUnsignedLongLong
from cython.view cimport array as cvarray
from cpython.unicode cimport (PyUnicode_AsUTF8AndSize, PyUnicode_DATA, PyUnicode_DecodeASCII,
                             PyUnicode_DecodeUTF8, PyUnicode_GET_LENGTH, PyUnicode_KIND, PyUnicode_READ)


cdef extern from *:
    void __builtin_prefetch(const void* p) nogil  # (gcc, clang)
    int __builtin_ctzll(unsigned long long x) nogil  # (gcc, clang; x != 0)


cdef extern from "Python.h":
    int PyUnicode_IS_ASCII(object o)


# A hash table's slots: read at random, one per key, so a table of millions of keys spent
# most of its time on TLB misses in 4 KiB pages; large ones are asked for in huge pages where
# the kernel gives them on request (Linux's transparent huge pages, `madvise`; numpy asks
# the same for its large arrays). Freed with `free`.
cdef extern from *:
    """
    #include <stdlib.h>
    #if defined(__linux__)
    #include <sys/mman.h>
    #endif
    static void* overlap_table_alloc(size_t n) {
    #if defined(__linux__) && defined(MADV_HUGEPAGE)
        if (n >= ((size_t)4 << 20)) {
            void* p = NULL;
            if (posix_memalign(&p, (size_t)2 << 20, n) != 0) return NULL;
            madvise(p, n, MADV_HUGEPAGE);
            return p;
        }
    #endif
        return malloc(n);
    }
    """
    void* overlap_table_alloc(size_t n) nogil

# Entries of a table read ahead of the one at hand (`decode_meta_stats`, `gather_spans`,
# `boundary_names`, `text_facts`): a plane's metadata entries lie ~500 bytes apart, so each
# name or text read in id order is a line of its own, and unprefetched each waited for memory
# (72k copy names: 7 ms, where the same names side by side took 1.8; with this, 1.4)
cdef enum:
    _AHEAD = 16
    _LINES_AHEAD = 2048  # bytes ahead of a walk that steps over entries by their lengths
    _TAILS = 4  # stat tails `_value_check` and `_meta_value` keep (`_tail_slot`)


cdef bint _LITTLE = sys.byteorder == "little"  # (a word's byte i is its bits 8i..8i+7)


class Corrupt(ValueError):
    """The bytes are not a valid XSpace (a damaged event, line or plane)."""


# error codes (negative positions)
cdef enum:
    E_TRUNC = -1
    E_LONG = -2
    E_WT = -3
    E_PAST = -4
    E_FN0 = -5
    E_GROUP = -6
    E_DEPTH = -7
    E_TAG = -8
    E_SIZE = -9

# upb's limits, which the scanner holds so that both decoders refuse the same bytes: a tag is
# at most 5 bytes and below 2**32 (field numbers below 2**29), a length prefix at most 5 bytes
# and below 2**31 - 1; groups and messages nest at most DEPTH_LIMIT deep, counted from the
# XSpace (an XPlane is at depth 1, an XLine or a map entry 2, an XEvent or an XEventMetadata
# 3, an XStat 4: an unknown group inside an XStat may nest 96 deep).
cdef enum:
    DEPTH_LIMIT = 100
    D_SPACE = 0
    D_PLANE = 1
    D_LINE = 2
    D_EVENT = 3
    D_STAT = 4

_MESSAGES = {
    E_TRUNC: "truncated varint",
    E_LONG: "varint longer than 10 bytes",
    E_WT: "unsupported wire type",
    E_PAST: "field runs past its message",
    E_FN0: "field number 0",
    E_GROUP: "mismatched end of group",
    E_DEPTH: "groups nested too deep",
    E_TAG: "tag longer than 5 bytes or beyond 2**32",
    E_SIZE: "length prefix longer than 5 bytes or beyond 2**31",
}


cdef object _fail(Py_ssize_t code):
    return Corrupt(_MESSAGES.get(code, "damaged record"))


cdef inline Py_ssize_t _varint(const uint8_t* b, Py_ssize_t p, Py_ssize_t end,
                               uint64_t* out) noexcept nogil:
    """The varint at p (which must end before `end`): new position, or an error code."""
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef uint8_t x
    while True:
        if p >= end:
            return E_TRUNC
        x = b[p]
        p += 1
        v |= (<uint64_t>(x & 0x7F)) << shift
        if x < 0x80:
            out[0] = v
            return p
        shift += 7
        if shift > 63:
            return E_LONG


cdef inline Py_ssize_t _tag(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, uint64_t* fn,
                            int* wt) noexcept nogil:
    cdef uint64_t t
    cdef Py_ssize_t p0 = p
    cdef uint8_t x
    if p < end:
        x = b[p]
        if 8 <= x < 0x80:  # one byte, field number > 0: nearly every tag of a capture
            wt[0] = <int>(x & 7)
            fn[0] = x >> 3
            return p + 1
    p = _varint(b, p, end, &t)
    if p < 0:
        return p
    if p - p0 > 5 or t > 0xFFFFFFFFULL:
        return E_TAG
    wt[0] = <int>(t & 7)
    fn[0] = t >> 3
    if fn[0] == 0:
        return E_FN0
    return p


cdef Py_ssize_t _skip(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int wt, uint64_t fn,
                      int depth) noexcept nogil:
    """Skip the value of a field of wire type `wt` at p: the position after it, or an error."""
    cdef uint64_t v, fn2
    cdef int wt2
    if wt == 0:
        return _varint(b, p, end, &v)
    if wt == 1:
        return p + 8 if p + 8 <= end else E_PAST
    if wt == 5:
        return p + 4 if p + 4 <= end else E_PAST
    if wt == 2:
        return _size(b, p, end, &v)
    if wt == 3:  # a group (unknown field): up to its matching end tag
        if depth >= DEPTH_LIMIT:
            return E_DEPTH
        while True:
            p = _tag(b, p, end, &fn2, &wt2)
            if p < 0:
                return p
            if wt2 == 4:
                return p if fn2 == fn else E_GROUP
            p = _skip(b, p, end, wt2, fn2, depth + 1)
            if p < 0:
                return p
    return E_WT


cdef inline Py_ssize_t _size(const uint8_t* b, Py_ssize_t p, Py_ssize_t end,
                             uint64_t* v) noexcept nogil:
    """The end of the length-delimited payload whose length prefix is at p, or an error."""
    cdef Py_ssize_t p0 = p
    if p < end and b[p] < 0x80:  # a one-byte length: most stats and events
        v[0] = b[p]
        if v[0] > <uint64_t>(end - p - 1):
            return E_PAST
        return p + 1 + <Py_ssize_t>v[0]
    p = _varint(b, p, end, v)
    if p < 0:
        return p
    if p - p0 > 5 or v[0] >= 0x7FFFFFFFULL:
        return E_SIZE
    if v[0] > <uint64_t>(end - p):
        return E_PAST
    return p + <Py_ssize_t>v[0]


cdef inline Py_ssize_t _len(const uint8_t* b, Py_ssize_t p, Py_ssize_t end,
                            Py_ssize_t* q) noexcept nogil:
    """A length-delimited payload at p: its start (returned) and end (q)."""
    cdef uint64_t v
    cdef Py_ssize_t r = _size(b, p, end, &v)
    if r < 0:
        return r
    q[0] = r
    return r - <Py_ssize_t>v


def enc_varint(uint64_t v):
    cdef uint8_t out[10]
    cdef int k = 0
    while v >= 0x80:
        out[k] = <uint8_t>((v & 0x7F) | 0x80)
        v >>= 7
        k += 1
    out[k] = <uint8_t>v
    return PyBytes_FromStringAndSize(<char*>out, k + 1)


cdef inline bint _ascii(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    """Is s[:n] plain ASCII? Words OR-ed together, the last word overlapping the one before
    (never a byte outside s[:n]), a short string byte by byte without a branch per byte.
    Why: a capture's strings are nearly all ASCII and short (display names, stat values ~10
    bytes, HLO texts ~150): `_utf8_ok`'s loop stepped through every string's tail (under 8
    bytes) one byte and three branches at a time, ~60% of its time on the many-ops file."""
    cdef Py_ssize_t i = 0
    cdef uint64_t w, acc = 0
    cdef uint8_t a = 0
    if n < 8:
        while i < n:
            a |= s[i]
            i += 1
        return a < 0x80
    while i + 8 <= n:
        memcpy(&w, s + i, 8)
        acc |= w
        i += 8
    memcpy(&w, s + n - 8, 8)
    return ((acc | w) & 0x8080808080808080ULL) == 0


cdef bint _utf8_ok(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    """Is s[:n] valid UTF-8 as upb and Python's strict decoder define it (no overlong forms,
    no surrogates, nothing beyond U+10FFFF)? Plain ASCII by `_ascii`; else a walk checking
    ASCII 8 bytes at a time."""
    cdef Py_ssize_t i = 0
    cdef uint64_t w, w1, w2, w3
    cdef uint8_t c, c1
    if _ascii(s, n):
        return True
    while i < n:
        if i + 32 <= n:  # (HLO texts, ~150 bytes: four words a step)
            memcpy(&w, s + i, 8)
            memcpy(&w1, s + i + 8, 8)
            memcpy(&w2, s + i + 16, 8)
            memcpy(&w3, s + i + 24, 8)
            if ((w | w1 | w2 | w3) & 0x8080808080808080ULL) == 0:
                i += 32
                continue
        if i + 8 <= n:
            memcpy(&w, s + i, 8)
            if (w & 0x8080808080808080ULL) == 0:
                i += 8
                continue
        c = s[i]
        if c < 0x80:
            i += 1
        elif c < 0xC2:
            return False
        elif c < 0xE0:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return False
            i += 2
        elif c < 0xF0:
            if i + 2 >= n:
                return False
            c1 = s[i + 1]
            if (c1 & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80:
                return False
            if (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 >= 0xA0):
                return False  # overlong, or a surrogate
            i += 3
        elif c < 0xF5:
            if i + 3 >= n:
                return False
            c1 = s[i + 1]
            if ((c1 & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80
                    or (s[i + 3] & 0xC0) != 0x80):
                return False
            if (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 >= 0x90):
                return False  # overlong, or beyond U+10FFFF
            i += 4
        else:
            return False
    return True


def utf8_ok(const uint8_t[::1] data):
    """`_utf8_ok` of a whole buffer (for tests: the same answer as bytes.decode)."""
    return _utf8_ok(&data[0] if data.shape[0] else NULL, data.shape[0])


cdef inline bint _text_ok(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    """Is s[:n] valid UTF-8 (`_utf8_ok`) without a NUL? Words as `_ascii` reads them, a NUL
    found by the exact has-a-zero-byte test ((w - 0x01..) & ~w & 0x80..: nonzero iff a byte
    of w is 0); `_utf8_ok` only where a byte >= 0x80 is met."""
    cdef Py_ssize_t i = 0
    cdef uint64_t w, hi = 0, z = 0
    cdef uint8_t a = 0
    if n < 8:
        while i < n:
            if s[i] == 0:
                return False
            a |= s[i]
            i += 1
        return a < 0x80 or _utf8_ok(s, n)
    while i + 8 <= n:
        memcpy(&w, s + i, 8)
        hi |= w
        z |= (w - 0x0101010101010101ULL) & ~w
        i += 8
    memcpy(&w, s + n - 8, 8)  # (the last word overlaps the one before: no byte past s[:n])
    hi |= w
    z |= (w - 0x0101010101010101ULL) & ~w
    if z & 0x8080808080808080ULL:
        return False
    return (hi & 0x8080808080808080ULL) == 0 or _utf8_ok(s, n)


cdef int _spans_within(const int64_t[::1] fs, const int64_t[::1] fe, Py_ssize_t nb,
                       str what) except -1:
    """Refuse (ValueError) spans [fs[i], fe[i]) that do not lie within a buffer of `nb`
    bytes, and starts and ends of different lengths (`what`: the spans' name in the
    message). The check every function here that reads spans of a buffer makes first."""
    cdef Py_ssize_t i, n = fs.shape[0]
    if fe.shape[0] != n:
        raise ValueError(f"{what} starts and ends differ in length")
    for i in range(n):
        if fs[i] < 0 or fe[i] < fs[i] or fe[i] > nb:
            raise ValueError("span outside the buffer")
    return 0


def spans_text_ok(const uint8_t[::1] buf, const int64_t[::1] fs, const int64_t[::1] fe):
    """Whether every span [fs[i], fe[i]) of `buf` is non-empty, valid UTF-8 and without a
    NUL: each one as `MetaTable.span_strings` would give it, a str of its own. Read where
    the spans lie (`tpu._join_names`: 72k copy-start/copy-done names of the clocked
    many-ops capture were gathered into one buffer first, ~3 ms and ~700 page faults, to be
    checked and then compared with at most two names per Async event)."""
    cdef Py_ssize_t n = fs.shape[0], i, nb = buf.shape[0]
    _spans_within(fs, fe, nb, "span")
    if n == 0:
        return True
    if nb == 0:  # (every span empty)
        return False
    cdef const uint8_t* b = &buf[0]
    cdef bint good = True
    with nogil:
        for i in range(n):
            if i + _AHEAD < n:
                __builtin_prefetch(b + fs[i + _AHEAD])
            if fe[i] == fs[i] or not _text_ok(b + fs[i], fe[i] - fs[i]):
                good = False
                break
    return good


def span_texts(const uint8_t[::1] buf, const int64_t[::1] fs, const int64_t[::1] fe):
    """The spans [fs[i], fe[i]) of `buf` decoded as UTF-8 (strictly: UnicodeDecodeError
    where one is not), a list of str (`statids.LazyStatNames`). Why here: joined, decoded
    and split in Python, the joined bytes and their text (twice the names' bytes) lived
    beside the list on the read's peak."""
    cdef Py_ssize_t i, n = fs.shape[0], nb = buf.shape[0]
    _spans_within(fs, fe, nb, "span")
    cdef const uint8_t* b = &buf[0] if nb else NULL
    out = [None] * n
    for i in range(n):
        out[i] = PyUnicode_DecodeUTF8(<char*>(b + fs[i]), fe[i] - fs[i], NULL)
    return out


cdef object _text(const uint8_t* b, Py_ssize_t p, Py_ssize_t q, bint strict):
    raw = PyBytes_FromStringAndSize(<char*>(b + p), q - p)
    if not strict:
        return raw.decode("utf-8", "replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Corrupt("invalid UTF-8 in a string field") from None


# ---------------------------------------------------------------------------------------------
# Structure: planes, lines, metadata entries


# A line's record in `split_space`'s columns of every line: its header fields, where its
# payload lies, its event count. Why columns, not a tuple per line: a file of a million
# one-event lines held a tuple, five ints and then a Python object per line (~0.5 KiB a line,
# fuzz round 3); the columns are at most 56 bytes a line (`_LineRecs`), its name the only
# Python object.
cdef enum:
    _LREC = 7  # id, display_id, timestamp_ns, duration_ps, payload start, payload end, events


cdef int _line(const uint8_t* b, Py_ssize_t s, Py_ssize_t e, int64_t* rec,
               Py_ssize_t* texts) except -1:
    """A line's record into rec[0:_LREC] (see `_LREC`), where its name and display name (as
    written last) lie into texts[0:4] (start, end of each; -1 where absent); returns which
    of the two has invalid UTF-8 (bit 0 the name, bit 1 the display name)."""
    cdef int64_t lid = 0, did = 0, ts = 0, dur = 0
    cdef Py_ssize_t p = s, q, vp, n_ev = 0, ns = -1, ne = -1, ds = -1, de = -1
    cdef uint64_t fn, v
    cdef int wt
    while p < e:
        # A run of events (tag 0x22) of one-byte lengths, within the line, counted in place:
        # most of a line's bytes (a million events of ~20 bytes); anything else (a longer
        # event, another field, a length past the line's end) by the general readers below,
        # which raise what they always raised
        while p + 1 < e and b[p] == 0x22 and b[p + 1] < 0x80 and p + 2 + b[p + 1] <= e:
            p += 2 + b[p + 1]
            n_ev += 1
        if p >= e:
            break
        p = _tag(b, p, e, &fn, &wt)
        if p < 0:
            raise _fail(p)
        if wt == 0 and (fn == 1 or fn == 3 or fn == 9 or fn == 10):
            p = _varint(b, p, e, &v)
            if p < 0:
                raise _fail(p)
            if fn == 1:
                lid = <int64_t>v
            elif fn == 3:
                ts = <int64_t>v
            elif fn == 9:
                dur = <int64_t>v
            else:
                did = <int64_t>v
        elif wt == 2 and (fn == 4 or fn == 2 or fn == 11):
            vp = _len(b, p, e, &q)
            if vp < 0:
                raise _fail(vp)
            if fn == 4:
                n_ev += 1
            elif fn == 2:
                ns, ne = vp, q
            else:
                ds, de = vp, q
            p = q
        else:
            p = _skip(b, p, e, wt, fn, D_LINE)
            if p < 0:
                raise _fail(p)
    cdef int bad = 0
    if ns >= 0 and not _utf8_ok(b + ns, ne - ns):
        bad |= 1
    if ds >= 0 and not _utf8_ok(b + ds, de - ds):
        bad |= 2
    texts[0], texts[1], texts[2], texts[3] = ns, ne, ds, de
    rec[0], rec[1], rec[2], rec[3], rec[4], rec[5], rec[6] = lid, did, ts, dur, s, e, n_ev
    return bad


@cython.final
cdef class _I64s:
    """A growable int64 vector in a malloc'd block, handed to numpy without a copy (entry
    spans and line records in C, not lists of Python ints: 108k entries on a many-ops
    capture, two ints each, then a conversion, cost ~5 ms)."""
    cdef int64_t* v
    cdef Py_ssize_t n, cap

    def __cinit__(self):
        self.n, self.cap = 0, 16
        self.v = <int64_t*>malloc(self.cap * sizeof(int64_t))
        if self.v == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.v)

    cdef int64_t* grow(self, Py_ssize_t k) except NULL:
        """Room for `k` more values at the end, counted in: where to write them (valid until
        the vector grows again)."""
        if self.n + k > self.cap:
            while self.n + k > self.cap:
                self.cap *= 2
            self.v = <int64_t*>_resized(self.v, self.cap * sizeof(int64_t))
        self.n += k
        return self.v + self.n - k

    cdef int push(self, int64_t x) except -1:
        self.grow(1)[0] = x
        return 0

    cdef object taken(self):
        return _owned_int64(&self.v, self.n)


ctypedef struct _SpanV:
    # A `_Pos` block as read (`_Pos.view`): int64 where `wide`, else int32.
    const void* v
    bint wide


cdef inline int64_t _sp(_SpanV s, Py_ssize_t i) noexcept nogil:
    return (<const int64_t*>s.v)[i] if s.wide else (<const int32_t*>s.v)[i]


@cython.final
cdef class _Pos:
    """A growable int64 vector held as int32 (`wide` False) while every value fits, widened
    to int64 at the first that does not; `wide` from the start for positions in a buffer of
    2 GiB or more. Positions in a buffer (entry and name spans) and line records
    (`_LineRecs`). Why: a GPU plane of a million event-metadata entries kept their starts
    and ends as int64 through the split (16 MB on the read's peak), and a million one-event
    lines wrote 56 MB of int64 records, narrowed only once the walk was done (a real
    capture's lines carry 64-bit thread ids: widened at its first line)."""
    cdef void* v
    cdef Py_ssize_t n, cap
    cdef bint wide

    def __cinit__(self, bint wide):
        self.n, self.cap, self.wide = 0, 16, wide
        self.v = malloc(self.cap * (8 if wide else 4))
        if self.v == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.v)

    cdef inline int push(self, int64_t x) except -1:
        if self.n == self.cap:
            self.cap *= 2
            self.v = _resized(self.v, self.cap * (8 if self.wide else 4))
        if not self.wide and not -2147483648 <= x <= 2147483647:
            self._widen()
        if self.wide:
            (<int64_t*>self.v)[self.n] = x
        else:
            (<int32_t*>self.v)[self.n] = <int32_t>x
        self.n += 1
        return 0

    cdef int fill(self, int64_t x, Py_ssize_t k) except -1:
        """`push` of x k times: room made and x's range tested once."""
        cdef Py_ssize_t i
        while self.n + k > self.cap:
            self.cap *= 2
            self.v = _resized(self.v, self.cap * (8 if self.wide else 4))
        if not self.wide and not -2147483648 <= x <= 2147483647:
            self._widen()
        if self.wide:
            for i in range(k):
                (<int64_t*>self.v)[self.n + i] = x
        else:
            for i in range(k):
                (<int32_t*>self.v)[self.n + i] = <int32_t>x
        self.n += k
        return 0

    cdef int _widen(self) except -1:
        """The values so far as int64 (a new block; the old one freed)."""
        cdef int64_t* w = <int64_t*>malloc(self.cap * sizeof(int64_t))
        cdef Py_ssize_t i
        if w == NULL:
            raise MemoryError()
        for i in range(self.n):
            w[i] = (<int32_t*>self.v)[i]
        free(self.v)
        self.v, self.wide = w, True
        return 0

    cdef void firsts(self, const int32_t* first, Py_ssize_t m) noexcept nogil:
        """Pairs (2r, 2r + 1) for r = first[0..m-1] into places (2c, 2c + 1), in place:
        `first` ascending with first[c] >= c (a code's first line), so no pair is written
        over before it is read."""
        cdef Py_ssize_t c, r
        for c in range(m):
            r = first[c]
            if self.wide:
                (<int64_t*>self.v)[2 * c] = (<int64_t*>self.v)[2 * r]
                (<int64_t*>self.v)[2 * c + 1] = (<int64_t*>self.v)[2 * r + 1]
            else:
                (<int32_t*>self.v)[2 * c] = (<int32_t*>self.v)[2 * r]
                (<int32_t*>self.v)[2 * c + 1] = (<int32_t*>self.v)[2 * r + 1]

    cdef inline _SpanV view(self) noexcept nogil:
        """The block as it is now (valid until the vector grows or widens)."""
        cdef _SpanV s
        s.v, s.wide = self.v, self.wide
        return s

    cdef inline int64_t at(self, Py_ssize_t i) noexcept nogil:
        return _sp(self.view(), i)

    cdef object taken(self, bint narrow=True):
        """The values, int32 where `narrow` and every one fit, else int64."""
        if not narrow and not self.wide:
            self._widen()
        if self.wide:
            return _owned(&self.v, self.n, sizeof(int64_t), _I64_FORMAT, np.int64)
        return _owned_int32(&self.v, self.n)


@cython.final
cdef class _LineRecs:
    """The lines of one `split_space`: records (`_LREC` values each, by column), names and
    display names, and how many of those strings had invalid UTF-8.

    Equal names are one object, and each line has its name's code (the distinct names in
    order of first appearance, by their bytes), with, per distinct name, its first line and
    its marks (bit 0: it starts with one of `prefixes`, bit 1: it holds a `(`). Why: the GPU
    rules group and test lines by name (`vendors.note_other_events`,
    `_other_event_unknowns`); a capture of a million one-event lines paid three passes over a
    million Python strings for it (a hash, a prefix test and a search for `(`, ~0.25 s), and
    100k planes of one "Stream #1" line each held 100k copies of it (~6 MiB). No codes (None)
    where a name has invalid UTF-8: read with replacement, two different byte strings can be
    one text. A display name whose bytes are the previous line's is that line's object.

    The names are coded once the walk is done (`_coded_names`), not line by line within it:
    a table of a million names is read at random, and the walk's work between two lookups
    left each one waiting for memory (~0.25 s); read in a loop of their own, each name's
    slot is fetched ahead."""
    # The records by column (`_LREC` of them): a column's `_Pos` (int32 while every value
    # fits) is made at the first line whose value differs from the first line's (`first`);
    # until then (`spilled` bit clear) the column is that one value. Why: a million one-event
    # lines wrote the same display id, timestamp, duration and event count on every line,
    # 16 of their 28 MB of int32 records on the read's peak.
    cdef list cols
    cdef int64_t first[_LREC]
    cdef int spilled
    cdef _Pos spans  # (per line, where its name lies; -1, -1: absent; int32 below 2 GiB)
    cdef Py_ssize_t n
    cdef list displays  # (None while every display name is empty: most producers write none)
    cdef dict odd  # line -> its name, where it has invalid UTF-8 (read with replacement)
    cdef int bad
    cdef tuple prefixes  # (held: `pre` points into them)
    cdef const char* pre[4]
    cdef Py_ssize_t pre_n[4]
    cdef int npre
    cdef object last_disp  # the previous valid display name
    cdef Py_ssize_t last_s, last_n  # (where it lies, and its length)

    def __cinit__(self, tuple prefixes=(), bint wide=True):
        if len(prefixes) > 4:
            raise ValueError("at most 4 line name prefixes")
        # (`wide`: the buffer is 2 GiB or more; the names' spans int64. Why int32 else: a
        # million lines' spans were 16 MB of int64 on the split's peak)
        self.cols, self.spilled, self.spans = [None] * _LREC, 0, _Pos(wide)
        self.n, self.bad = 0, 0
        self.displays, self.odd = None, {}
        self.prefixes = tuple([bytes(x) for x in prefixes])
        self.npre = len(self.prefixes)
        for i in range(self.npre):
            self.pre[i] = self.prefixes[i]
            self.pre_n[i] = len(self.prefixes[i])
        self.last_disp = None
        self.last_s = self.last_n = 0

    cdef int add(self, const uint8_t* b, Py_ssize_t s, Py_ssize_t e) except -1:
        cdef Py_ssize_t texts[4]
        cdef int64_t r[_LREC]
        cdef int bad = _line(b, s, e, r, texts)
        self._record(r)
        self.spans.push(texts[0])
        self.spans.push(texts[1])
        self.bad += (bad & 1) + (bad >> 1)
        if bad & 1:
            self.odd[self.n] = _text(b, texts[0], texts[1], False)
        d = self._display(b, texts[2], texts[3], bad & 2)
        if self.displays is not None:
            self.displays.append(d)
        elif len(d):  # the first display name: the lines before it had none
            self.displays = [""] * self.n
            self.displays.append(d)
        self.n += 1
        return 0

    cdef inline int _record(self, const int64_t* r) except -1:
        """Line `self.n`'s record r[0:_LREC] into its columns."""
        cdef int c
        if self.n == 0:
            memcpy(self.first, r, _LREC * sizeof(int64_t))
            return 0
        for c in range(_LREC):
            if self.spilled >> c & 1:
                (<_Pos>self.cols[c]).push(r[c])
            elif r[c] != self.first[c]:
                col = _Pos(False)
                col.fill(self.first[c], self.n)
                col.push(r[c])
                self.cols[c] = col
                self.spilled |= 1 << c
        return 0

    cdef object _display(self, const uint8_t* b, Py_ssize_t p, Py_ssize_t q, int bad):
        """The display name b[p:q] ("" where absent, p < 0; invalid UTF-8 replaced where
        `bad`): the previous line's object where the bytes are its bytes (same buffer)."""
        if p < 0:
            return ""
        if bad:
            return _text(b, p, q, False)
        if self.last_disp is not None and q - p == self.last_n \
                and memcmp(b + p, b + self.last_s, q - p) == 0:
            return self.last_disp
        t = PyUnicode_DecodeUTF8(<char*>(b + p), q - p, NULL)
        self.last_disp = t
        self.last_s, self.last_n = p, q - p
        return t

    cdef int _marks(self, const uint8_t* s, Py_ssize_t k):
        cdef int m = 0, i
        for i in range(self.npre):
            if k >= self.pre_n[i] and memcmp(s, self.pre[i], self.pre_n[i]) == 0:
                m = 1
                break
        if k > 0 and memchr(s, 0x28, k) != NULL:  # "("
            m |= 2
        return m

    cdef tuple taken(self, const uint8_t* b):
        """(records: (lines, per column of `_LREC` its values: an int64 array (int32 where the
        lines are `NARROW_LINES_MIN` or more and every value fits: `_Pos`), or one int where
        every line has that value (`lines.Records`)), names, display names (None:
        all empty), strings with invalid UTF-8 among them, (per line its name's code, per code its first
        line (both int32; None where the names are kept as bytes) and its marks (uint8)) or None
        where a name has invalid UTF-8); `b` the buffer
        the lines were added from. The names: a list of str, one object per distinct name, or,
        where the names are coded and `LAZY_NAMES_MIN` or more distinct, (their bytes in code
        order as a uint8 array, per code its offset there, one more at the end: int32 where
        they are under 2 GiB, else int64), decoded when asked (`lines.LineNames`). The columns'
        blocks are the arrays' from here on."""
        cdef int c
        cdef bint narrow = self.n >= NARROW_LINES_MIN
        rec = (self.n, [(<_Pos>self.cols[c]).taken(narrow) if self.spilled >> c & 1
                        else (self.first[c] if self.n else 0) for c in range(_LREC)])
        self.cols = None
        names, codes = self._coded_names(b)
        return (rec, names, self.displays, self.bad, codes)

    cdef tuple _coded_names(self, const uint8_t* b):
        """(names, codes as `taken` gives them): an open-addressing table over the names'
        hashes, sized for every line to be its own name, each line's slot fetched `_AHEAD`
        lines before it is read. A slot (4 bytes) holds its name's code + 1 in its low `cbits`
        bits (enough for the lines' count) under the hash's top bits that are left (0:
        empty), so that a slot taken by another name is passed over without reading anything
        else, at most a 2^-(32 - cbits) chance in a probe (a million lines: 1/4096) that the
        bytes are compared for nothing. Why 4 bytes: a million lines' table was 16 MB of
        8-byte slots on the read's peak. The names are decoded after the coding, once per
        code (`_name_list`), or kept as bytes (`_name_bytes`)."""
        cdef Py_ssize_t n = self.n, i, j, c, m = 0, k, nslots = 16
        cdef _SpanV sp = self.spans.view()
        if n > 0x7FFFFFFE:  # (int32 codes and lines: more than any file holds)
            raise MemoryError("more than 2^31 - 2 lines")
        while nslots < 2 * n:
            nslots *= 2
        cdef int cbits = 1
        while (<Py_ssize_t>1 << cbits) <= n:
            cbits += 1
        cdef uint32_t cmask = <uint32_t>((<uint64_t>1 << cbits) - 1), tag, v
        cdef uint64_t mask = <uint64_t>(nslots - 1), h
        cdef uint64_t ring[_AHEAD]  # the hashes of the lines ahead
        cdef uint32_t* slots = <uint32_t*>overlap_table_alloc(nslots * sizeof(uint32_t))
        # (per code, at most one a line: arrays of the lines' count, cut to the codes' after)
        codes_a, first_a = np.empty(n, np.int32), np.empty(n, np.int32)
        marks_a = np.empty(n, np.uint8)
        cdef int32_t[::1] codes = codes_a, first = first_a
        cdef uint8_t[::1] marks = marks_a
        cdef bint coded = not self.odd
        cdef const uint8_t* t
        if slots == NULL:
            raise MemoryError()
        try:
            memset(slots, 0, nslots * sizeof(uint32_t))
            for i in range(min(n, _AHEAD)):
                ring[i] = _name_hash(b, sp, i)
            for i in range(n):
                h = ring[i % _AHEAD]
                if i + _AHEAD < n:
                    ring[i % _AHEAD] = _name_hash(b, sp, i + _AHEAD)
                    __builtin_prefetch(&slots[ring[i % _AHEAD] & mask])
                if self.odd and i in self.odd:
                    codes[i] = -1
                    continue
                k = _sp(sp, 2 * i + 1) - _sp(sp, 2 * i) if _sp(sp, 2 * i) >= 0 else 0
                t = b + _sp(sp, 2 * i) if _sp(sp, 2 * i) >= 0 else b
                j = <Py_ssize_t>(h & mask)
                tag = <uint32_t>(h >> 32) & ~cmask
                while True:
                    v = slots[j]
                    if v == 0:  # a new name
                        c = m
                        slots[j] = tag | <uint32_t>(c + 1)
                        m += 1
                        first[c] = <int32_t>i
                        marks[c] = <uint8_t>self._marks(t, k)
                        break
                    if (v & ~cmask) == tag:
                        c = <Py_ssize_t>(v & cmask) - 1
                        if _name_is(b, sp, first[c], t, k):
                            break
                    j = (j + 1) & <Py_ssize_t>mask
                codes[i] = <int32_t>c
        finally:
            free(slots)
        if coded and m >= LAZY_NAMES_MIN:
            # (each code's span moved to its place, c, over the lines' (first[c] >= c: none
            # is written before it is read), and the first lines dropped before the names'
            # bytes are copied out: 4 MB less on the read's peak, a million names)
            self.spans.firsts(&first[0], m)
            first = None
            first_a = None
            names = _name_bytes(b, self.spans.view(), m)
        else:
            names = self._name_list(b, &codes[0], &first[0], m)
        self.spans = None
        if not coded:
            return names, None
        if isinstance(names, tuple):  # (kept as bytes: no first line per code, read by a list)
            return names, (codes_a, None, marks_a[:m].copy() if m < n // 2 else marks_a[:m])
        if m < n // 2:  # (few distinct names: not the lines' count of bytes kept)
            return names, (codes_a, first_a[:m].copy(), marks_a[:m].copy())
        return names, (codes_a, first_a[:m], marks_a[:m])

    cdef list _name_list(self, const uint8_t* b, const int32_t* codes, const int32_t* first,
                         Py_ssize_t m):
        """Per line its name: one str per code (decoded in code order), the line's invalid
        one (read with replacement) where its code is -1."""
        cdef _SpanV sp = self.spans.view()
        cdef Py_ssize_t i, c, r, n = self.n
        cdef list texts = [None] * m, names = [None] * n
        for c in range(m):
            r = first[c]
            texts[c] = PyUnicode_DecodeUTF8(<char*>(b + _sp(sp, 2 * r)),
                                            _sp(sp, 2 * r + 1) - _sp(sp, 2 * r),
                                            NULL) if _sp(sp, 2 * r) >= 0 else ""
        for i in range(n):
            c = codes[i]
            names[i] = texts[c] if c >= 0 else self.odd[i]
        return names


# The buffer length from which `split_space` keeps positions in it (entry spans, line names'
# spans) as int64, else int32 (a test sets it lower to read the int64 path on a small file)
WIDE_POSITIONS = 0x7fffffff

# Lines from which `split_space` gives their records as int32 where every value fits
# (`_Pos`): a million one-event lines' records were 53 MiB of int64 on the read's peak;
# a real capture's few dozen lines carry 64-bit thread ids, and stay int64
NARROW_LINES_MIN = 1 << 16


cdef object _owned_int32(void** p, Py_ssize_t n):
    """`_owned_int64` of a block of n int32 values."""
    return _owned(p, n, sizeof(int32_t), "i", np.int32)


# Distinct line names from which `split_space` keeps them as bytes (`_LineRecs.taken`): a
# decoded name is ~70 bytes of `str` and list (a million one-event lines: 76 MiB of a 36 MB
# file, on the read's peak), its bytes and offset ~18; real captures name a few dozen lines
LAZY_NAMES_MIN = 1 << 16


cdef tuple _name_bytes(const uint8_t* b, _SpanV sp, Py_ssize_t m):
    """(the bytes of the names of codes 0..m-1 one after the other, a uint8 array; per code
    its offset there, and the end: m + 1, int32 where the bytes are under 2 GiB, else
    int64), code c's name at span c of `sp` (-1 where absent: empty)."""
    cdef Py_ssize_t c, k, p = 0, total = 0
    for c in range(m):
        if _sp(sp, 2 * c) >= 0:
            total += _sp(sp, 2 * c + 1) - _sp(sp, 2 * c)
    # (offsets int32 where the bytes allow: a million names' were 8 MB of int64 on the read's
    # peak)
    cdef bint narrow = total < (<Py_ssize_t>1 << 31)
    blob_a, off_a = np.empty(total, np.uint8), np.empty(m + 1, np.int32 if narrow else np.int64)
    cdef uint8_t[::1] blob = blob_a
    cdef int32_t[::1] off32
    cdef int64_t[::1] off64
    if narrow:
        off32 = off_a
    else:
        off64 = off_a
    for c in range(m + 1):
        if narrow:
            off32[c] = <int32_t>p
        else:
            off64[c] = p
        if c == m:
            break
        k = _sp(sp, 2 * c + 1) - _sp(sp, 2 * c) if _sp(sp, 2 * c) >= 0 else 0
        if k:
            memcpy(&blob[p], b + _sp(sp, 2 * c), k)
        p += k
    return blob_a, off_a


cdef inline uint64_t _name_hash(const uint8_t* b, _SpanV sp, Py_ssize_t i) noexcept nogil:
    """The hash of line i's name (`_LineRecs.spans`; absent: as empty)."""
    if _sp(sp, 2 * i) < 0:
        return _hash_value(b, 5, 0, 0)
    return _hash_value(b, 5, <uint64_t>(_sp(sp, 2 * i + 1) - _sp(sp, 2 * i)), _sp(sp, 2 * i))


cdef inline bint _name_is(const uint8_t* b, _SpanV sp, int64_t r, const uint8_t* t,
                          Py_ssize_t k) noexcept nogil:
    """Are line r's name bytes t[:k]?"""
    cdef Py_ssize_t kr = _sp(sp, 2 * r + 1) - _sp(sp, 2 * r) if _sp(sp, 2 * r) >= 0 else 0
    return kr == k and (k == 0 or memcmp(b + _sp(sp, 2 * r), t, k) == 0)


# A plane's (stripped, bad, meta, stats) as `_plane` gives it where nothing was stripped or
# counted: one tuple for all such planes without (and one for those with) plane stats (100k
# small planes: a tuple each was ~0.1 KiB a plane).
_PLAIN = (False, 0, None, False)
_PLAIN_STATS = (False, 0, None, True)
# The plane whose own stats no rule reads and which can hold millions of them (one per call
# stack: 1.6M in a real 4000-step H200 capture, 90 MiB as upb's messages): its plain stats are
# left out of the skeleton, checked here, and parsed from the file's bytes only if asked
# (`PlaneView.stats`).
_LAZY_STATS_PLANE = "/host:__ScopeRangeCallStack__"


cdef bint _plain_stat(const uint8_t* b, Py_ssize_t p, Py_ssize_t e) noexcept nogil:
    """Does upb read the XStat payload [p, e) without refusing it or replacing a string, and
    with no group in it? Every field's tag, varint, fixed width or length must be whole and
    field 5 (str_value) valid UTF-8 wherever it is written. Any other stat stays in the
    skeleton, for upb to read (or refuse, or count) as it always did."""
    cdef uint64_t fn, v
    cdef int wt
    cdef Py_ssize_t q
    while p < e:
        p = _tag(b, p, e, &fn, &wt)
        if p < 0:
            return False
        if wt == 0:
            p = _varint(b, p, e, &v)
        elif wt == 1:
            p = p + 8 if p + 8 <= e else E_PAST
        elif wt == 5:
            p = p + 4 if p + 4 <= e else E_PAST
        elif wt == 2:
            q = _len(b, p, e, &p)
            if q < 0:
                return False
            if fn == 5 and not _utf8_ok(b + q, p - q):
                return False
        else:
            return False
        if p < 0:
            return False
    return True


cdef tuple _plane(const uint8_t[::1] mv, Py_ssize_t s, Py_ssize_t e, object strip_meta,
                  _LineRecs lines, _Pos starts, _Pos ends, _I64s sspans, Py_ssize_t lazy_min,
                  _Seen seen, int gpu_mode, bint bare_ok):
    """(plane bytes without lines, stat metadata [and entries], as parts to be joined (a
    plane's bytes joined on their own were copied twice: the host plane of a capture with
    programs holds MBs of them), (stripped, strings with
    invalid UTF-8 in the stripped entries, each copy written counted: upb then never sees
    those entries up front, so they are checked here as upb would check them; the stripped
    entries decoded, else None: see `_plane_walk`; whether it has plane stats: upb's
    `stats` is empty where not), its stat metadata (`_stat_names`)). Its
    lines are added to `lines`, its event_metadata entries' starts and ends to `starts` and
    `ends`; `sspans` is scratch for its stat metadata entries. Its stats flag is, for the
    plane named `_LAZY_STATS_PLANE` where a plain stat was left out of the skeleton, the
    (start, end) of every one of its stat fields, in order, as one int64 array, and so for
    a bare plane's plain stats. Then, for a bare plane (`BARE_MODE`: its parts None), its
    name (else None), and its id (the last written; 0 where none)."""
    parts = []  # (the plane's bytes left: joined once, with the space's, not per plane)
    cdef int64_t pid = 0
    stripped, bad, meta, names, stats, bare = _plane_walk(
        &mv[0], s, e, strip_meta, parts, lines, starts, ends, sspans,
        mv.shape[0] <= WIDE_POSITIONS, lazy_min, seen, gpu_mode, &pid, bare_ok)
    if bare is not None:  # (no part of it for upb: see `_plane_walk`)
        parts = None
    if not stripped and not bad and meta is None and (stats is True or stats is False):
        return parts, (_PLAIN_STATS if stats else _PLAIN), names, bare, pid
    return parts, (stripped, bad, meta, stats), names, bare, pid


cdef tuple _plane_walk(const uint8_t* b, Py_ssize_t s, Py_ssize_t e, object strip_meta,
                       list parts, _LineRecs lines, _Pos starts, _Pos ends, _I64s sspans,
                       bint narrow, Py_ssize_t lazy_min, _Seen seen, int gpu_mode,
                       int64_t* pid, bint bare_ok):
    """`_plane`'s walk: (stripped, bad, meta, stat names, stats: see `_plane`), the plane's bytes
    without lines and stat metadata added to `parts`, its lines to `lines`, its entry spans
    to `starts` and `ends`; a stripped plane's entries, checked as upb would check them, also decoded in
    that check (`_entry_decode`) as `decode_meta(narrow=narrow)` gives them (else None)."""
    cdef Py_ssize_t p = s, fs, vp, q, run = s
    cdef uint64_t fn
    cdef int wt
    cdef int strip = -1  # decided at the first entry, for all of them
    cdef bint stats = False  # a plane stat written (upb's `stats` then holds one)
    cdef bint lazy = False  # the plane's stats are read lazily (`_LAZY_STATS_PLANE`)
    cdef bint cut = False  # a plain stat was left out of the skeleton
    cdef _I64s sfields = None  # (lazy or bare_ok: every stat field's start and end)
    cdef Py_ssize_t first = starts.n  # (this plane's entries: from here on)
    cdef Py_ssize_t sfirst = sspans.n  # (its stat metadata fields: (tag, payload, end) each)
    cdef int64_t* sp
    cdef Py_ssize_t nvp = -1, nq = -1  # (the name's bytes, `_gpu_plane_name`)
    # (what upb would be left to read of the plane: a bare plane, `BARE_MODE`, is one id and
    # one name, valid UTF-8, and nothing else)
    cdef int n_ids = 0, n_names = 0
    cdef bint kept = False  # a field other than those is left for upb
    cdef uint64_t v
    name = None
    while p < e:
        fs = p
        # the entries are walked by their lengths, ~300 bytes a step: the bytes a few steps
        # on are asked for now (18 -> 15 ms on the many-ops capture's 108k entries; a hint
        # past the buffer's end is ignored, never a fault)
        __builtin_prefetch(b + p + _LINES_AHEAD)
        p = _tag(b, p, e, &fn, &wt)
        if p < 0:
            raise _fail(p)
        if wt == 2 and (fn == 2 or fn == 3 or fn == 4 or fn == 5):
            vp = _len(b, p, e, &q)
            if vp < 0:
                raise _fail(vp)
            if fn == 5:  # stat metadata: never in the skeleton (`_stat_names`)
                if fs > run:
                    parts.append(PyBytes_FromStringAndSize(<char*>(b + run), fs - run))
                sp = sspans.grow(3)
                sp[0], sp[1], sp[2] = fs, vp, q
                run = q
            elif fn == 3:
                if fs > run:
                    parts.append(PyBytes_FromStringAndSize(<char*>(b + run), fs - run))
                lines.add(b, vp, q)
                run = q
            elif fn == 4:
                starts.push(vp)
                ends.push(q)
                if strip < 0:
                    # (a GPU plane's name answered here, not by a Python call: `_GPU_MODE`)
                    strip = gpu_mode if gpu_mode and name is not None and \
                        _gpu_plane_name(b, nvp, nq) else _strip_mode(strip_meta, name)
                    if strip == 3:  # (stripped where the entries are many: see `_strip_mode`)
                        strip = 1 if _entry_run(b, fs, e, META_STRIP_MIN) >= META_STRIP_MIN \
                            else 0
                    elif strip == 4:
                        strip = 1 if _entry_run(b, fs, e, SKELETON_STRIP_MIN) \
                            >= SKELETON_STRIP_MIN else 0
                if strip:
                    if fs > run:
                        parts.append(PyBytes_FromStringAndSize(<char*>(b + run), fs - run))
                    run = q
                else:
                    kept = True
            else:
                name = _text(b, vp, q, False)
                nvp, nq = vp, q
                n_names += 1
                lazy = name == _LAZY_STATS_PLANE
            p = q
        elif fn == 6 and wt == 2 and (lazy or bare_ok):
            # a plane stat, its field's span noted: the lazy plane's plain stats are cut
            # from the skeleton, a bare plane's (every one plain) left out with the plane;
            # either read from the file when asked (`PlaneView.stats`, `plane_stats`)
            stats = True
            vp = _len(b, p, e, &q)
            if vp < 0:
                raise _fail(vp)
            if sfields is None:
                sfields = _I64s()
            sfields.push(fs)
            sfields.push(q)
            if not _plain_stat(b, vp, q):  # (kept: upb reads it as it always did)
                kept = True
            elif lazy:
                if fs > run:
                    parts.append(PyBytes_FromStringAndSize(<char*>(b + run), fs - run))
                run = q
                cut = True
            p = q
        elif fn == 1 and wt == 0:  # the plane's id
            p = _varint(b, p, e, &v)
            if p < 0:
                raise _fail(p)
            pid[0] = <int64_t>v
            n_ids += 1
        else:
            if fn == 6 and wt == 2:
                stats = True
            kept = True
            p = _skip(b, p, e, wt, fn, D_PLANE)
            if p < 0:
                raise _fail(p)
    if e > run:
        parts.append(PyBytes_FromStringAndSize(<char*>(b + run), e - run))
    cdef int bad = 0
    cdef Py_ssize_t i, rc, nm = starts.n - first
    cdef Py_ssize_t q2
    # (the walk is done: the vectors no longer move)
    cdef int64_t o8[8]
    cdef int64_t tails[2 * _TAILS + 1]  # (`_value_check`: none yet)
    for i in range(2 * _TAILS + 1):
        tails[i] = 0 if i % 2 == 0 else -1
    cdef bint dok = True
    cdef bint shown = False  # (a display name's span written)
    cdef _Keys key = None
    cdef int64_t[:, ::1] name64, disp64, value64
    cdef int32_t[:, ::1] name32, disp32, value32
    meta = None
    if strip == 1:
        # `decode_meta` of each entry in the walk that checks it (`_entry_decode`): a second
        # walk over the 108k entries of the many-ops capture, tag by tag, cost ~4 ms
        arrays = _meta_arrays(nm, narrow)
        key = _Keys(nm, narrow)
        if narrow:
            name32, disp32, value32 = arrays
        else:
            name64, disp64, value64 = arrays
    if strip >= 1:
        # (mode 2: every entry checked as upb would, nothing kept: the reader decodes the
        # entries of many planes at once, `groups.MetaRows`)
        for i in range(nm):
            if i + _AHEAD < nm:  # (see _AHEAD)
                q2 = starts.at(first + i + _AHEAD)
                while q2 < ends.at(first + i + _AHEAD):
                    __builtin_prefetch(b + q2)
                    q2 += 64
            rc = _entry_decode(b, starts.at(first + i), ends.at(first + i), &bad, o8, tails)
            if rc < 0:
                raise _fail(rc)
            if strip == 1 and dok:
                if not o8[7]:
                    dok = False  # (the table is refused; every entry is still checked)
                elif _meta_store(i, o8, narrow, key, name64, disp64, value64, name32, disp32,
                                 value32) == 1:
                    shown = True
    if strip == 1:
        rev = _meta_reverse(dok, narrow, nm, key, name32, disp32, value32, shown)
        meta = {"ok": dok, "key": key.taken(), "name": arrays[0], "disp": arrays[1],
                "value": arrays[2], "reversed": rev}
    snames = _stat_names(b, sspans.v + sfirst, (sspans.n - sfirst) // 3, lazy_min, seen,
                         narrow)
    sspans.n = sfirst
    bare = name if bare_ok and (strip == BARE_MODE or strip == 1) and not kept and \
        n_ids <= 1 and n_names == 1 and _utf8_ok(b + nvp, nq - nvp) else None
    if bare is not None and sfields is not None:  # (its stats are all plain: see above)
        return (max(strip, 0), bad, meta, snames, sfields.taken(), bare)
    return (max(strip, 0), bad, meta, snames, sfields.taken() if cut else stats, bare)


# The mode of the planes that may be bare (`_plane_walk`): a plane `strip_meta` answers 2
# for (the reader's GPU planes of a file of many planes: `reader._strip_many`), or 1 (a TPU
# chip: its entries decoded here, its `meta`, as they are for any stripped plane), whose bytes,
# once its lines, stat metadata and event metadata are cut, are at most one id and one name
# (valid UTF-8), and plane stats none of which upb would mend (`_plain_stat`), is not
# handed to upb at all: its id and name are `split_space`'s, its stats the spans of their
# fields, read when asked (`plane_stats`). Why: 100k one-line GPU planes were ~50 ms and
# 10 MiB of upb's skeleton, and ~30 ms more to read each one's name back through a wrapper,
# for two fields the split had read already; 10k planes' device facts ~6 us a plane through
# upb's messages. A file of 4,096 TPU chips imported protobuf (~25 ms) for their skeleton
# alone: its chips' plane stats took it past the skeleton decoder's budget (round 42).
BARE_MODE = 2


# Entries from which a plane `strip_meta` answers 3 for is stripped (mode 1): upb's map costs
# ~220 bytes an entry (a GPU plane of a million distinct names: 220 MiB of a 21 MB file),
# the decoded arrays ~48; a real GPU plane holds a few thousand, read through upb as always
META_STRIP_MIN = 1 << 16
# ... and where it answers 4: a plane of this many would take the skeleton past what the
# pure-Python decoder reads (`skeleton.MAX_ENTRIES`, the same number), and so protobuf would
# be imported for upb to parse it, where the plane's reader may never ask its map
SKELETON_STRIP_MIN = 1500


# `split_space`'s `strip_meta` may say, as its attribute of this name, what it answers for
# every name `/device:GPU:` + ASCII digits (2 or 3): the split then answers those planes
# itself. Why: 100k one-line GPU planes made 100k Python calls and regex matches, ~60 ms of
# the split's ~150. Any other name is still asked of the function.
_GPU_MODE = "gpu_plane_mode"
cdef const char* _GPU_PREFIX = b"/device:GPU:"
cdef enum:
    _GPU_PREFIX_LEN = 12


cdef bint _gpu_plane_name(const uint8_t* b, Py_ssize_t p, Py_ssize_t q) noexcept nogil:
    """Are the bytes [p, q) `/device:GPU:` and one or more ASCII digits? (A name the reader's
    `GPU_PLANE_RE` matches, whatever else it matches: a name that fails here is asked.)"""
    cdef Py_ssize_t i
    if p < 0 or q - p <= _GPU_PREFIX_LEN or memcmp(b + p, _GPU_PREFIX, _GPU_PREFIX_LEN) != 0:
        return False
    for i in range(p + _GPU_PREFIX_LEN, q):
        if b[i] < 48 or b[i] > 57:
            return False
    return True


cdef int _strip_mode(object strip_meta, object name) except -1:
    """`strip_meta(plane name)` as `_plane_walk`'s mode: 0 (upb parses the plane's entries
    with its skeleton), 1 (stripped, and decoded here: `decode_meta`'s arrays), 2 (the
    answer 2: stripped, checked here, nothing kept), 3 (the answer 3: 1 where the run of
    entries starting at the first holds `META_STRIP_MIN` or more, else 0) or 4 (the answer
    4: the same, at `SKELETON_STRIP_MIN`)."""
    if strip_meta is None or name is None:
        return 0
    got = strip_meta(name)
    if type(got) is int and 2 <= got <= 4:
        return got
    return 1 if got else 0


cdef Py_ssize_t _entry_run(const uint8_t* b, Py_ssize_t p, Py_ssize_t e,
                           Py_ssize_t limit) noexcept nogil:
    """How many event_metadata entries (field 4) are written one after the other from p, up
    to `limit`: producers write a map's entries as one run. A damaged field ends the count
    (the walk then refuses it, whatever the mode)."""
    cdef Py_ssize_t n = 0, q
    cdef uint64_t fn
    cdef int wt
    while p < e and n < limit:
        p = _tag(b, p, e, &fn, &wt)
        if p < 0 or fn != 4 or wt != 2:
            break
        if _len(b, p, e, &q) < 0:
            break
        p = q
        n += 1
    return n


cdef inline int _map_entry(const uint8_t* b, Py_ssize_t p, Py_ssize_t e, int64_t* key,
                           Py_ssize_t* vs, Py_ssize_t* ve) noexcept nogil:
    """A map entry [p, e) with an integer key (event or stat metadata), as upb reads it
    plainly: 0, with its key (0 where absent) and its value's payload [vs, ve) (empty where
    absent); 1 where upb would read it otherwise (a field other than the key and the value,
    a value written twice, which upb merges, a wrong wire type, bytes upb refuses)."""
    cdef uint64_t fn, v
    cdef int wt
    cdef bint got = False
    key[0] = 0
    vs[0] = ve[0] = 0
    while p < e:
        p = _tag(b, p, e, &fn, &wt)
        if p < 0:
            return 1
        if fn == 1 and wt == 0:
            p = _varint(b, p, e, &v)
            if p < 0:
                return 1
            key[0] = <int64_t>v
        elif fn == 2 and wt == 2 and not got:
            got = True
            vs[0] = _len(b, p, e, ve)
            if vs[0] < 0:
                return 1
            p = ve[0]
        else:
            return 1
    return 0


cdef int _stat_entry(const uint8_t* b, Py_ssize_t p, Py_ssize_t e, int64_t* key,
                     Py_ssize_t* ns, Py_ssize_t* ne) noexcept nogil:
    """One stat_metadata map entry [p, e) read plainly: 1, with its key and its name's span
    (empty where it has none); 0 where upb is left to read it: anything but an entry
    `_map_entry` reads whose value holds only id varints and name and description texts of
    valid UTF-8 (an unknown field, with which upb keeps the value's bytes; a wrong wire type;
    damage, which upb names)."""
    cdef uint64_t fn, v
    cdef int wt
    cdef Py_ssize_t vp, q, tp, tq
    ns[0] = ne[0] = 0
    if _map_entry(b, p, e, key, &vp, &q):
        return 0
    while vp < q:
        vp = _tag(b, vp, q, &fn, &wt)
        if vp < 0:
            return 0
        if fn == 1 and wt == 0:
            vp = _varint(b, vp, q, &v)
            if vp < 0:
                return 0
        elif (fn == 2 or fn == 3) and wt == 2:
            tp = _len(b, vp, q, &tq)
            if tp < 0 or not _utf8_ok(b + tp, tq - tp):
                return 0
            if fn == 2:  # (a name written twice: the last one, as upb reads it)
                ns[0], ne[0] = tp, tq
            vp = tq
        else:
            return 0
    return 1


cdef object _stat_names(const uint8_t* b, const int64_t* sp, Py_ssize_t n,
                        Py_ssize_t lazy_min, _Seen seen, bint narrow=False):
    """A plane's stat metadata (its `n` entries, (tag, payload, end) each at `sp`), as
    `Plane.stat_names` reads upb's map: None where it has none; {id: name} in upb's
    iteration order where every entry reads plainly (`_stat_entry`) and the ids are dense
    (each in [0, distinct ids]: upb iterates those ascending, `skeleton.in_upb_order`); where
    they are and there are at least `lazy_min` entries (-1: never), their (id, name start,
    name end), the names undecoded (`statids.LazyStatNames`): where `narrow`, three int32
    rows, ids ascending, each id's last entry; else an int64 array of shape (n, 3) in the
    order written; else (the entries' field bytes, for upb; the ids as written
    and the map, where they read plainly but are not dense, else None and None), for
    `wire._stat_names`.

    A name an earlier plane of the space has (`seen`) is that plane's object: GPU planes
    carry the same stat names, a copy each (10k planes of ~20 entries: ~11 MiB of `str`).

    Why: upb built a message per entry in the skeleton and `Plane` a dict from it, ~1 us an
    entry: a capture whose copies all differ in size interns 100k details texts there
    (13.6 MB of a 30 MB file in the skeleton, 64 ms to read the map back); and, as a dict,
    ~180 bytes an entry (36 MiB for that capture's two such planes), most never read."""
    if n == 0:
        return None
    cdef Py_ssize_t i, ns, ne, distinct
    cdef int64_t k, lo = 0, hi = 0, last = 0
    cdef bint plain = True, ascending = True, dense
    cdef int64_t* got = <int64_t*>malloc(3 * n * sizeof(int64_t))
    cdef Py_ssize_t* at = NULL  # (dense ids: per id its last entry, `_last_of_each_id`)
    if got == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            if not _stat_entry(b, sp[3 * i + 1], sp[3 * i + 2], &k, &ns, &ne):
                plain = False
                break
            if i == 0:
                lo = hi = k
            else:
                lo, hi = min(lo, k), max(hi, k)
                ascending = ascending and k > last
            last = k
            got[3 * i], got[3 * i + 1], got[3 * i + 2] = k, ns, ne
        if not plain:
            fields = b"".join([PyBytes_FromStringAndSize(<char*>(b + sp[3 * i]),
                                                         sp[3 * i + 2] - sp[3 * i])
                               for i in range(n)])
            return (fields, None, None)
        # dense: every id in [0, distinct ids] (a dict's len: ids written twice count once)
        dense = lo >= 0 and hi <= n
        if dense:
            at = <Py_ssize_t*>malloc((hi + 1) * sizeof(Py_ssize_t))
            if at == NULL:
                raise MemoryError()
            distinct = _last_of_each_id(got, n, hi, at)
            dense = hi <= distinct
        if dense and 0 <= lazy_min <= n:
            if narrow and hi < (1 << 31) - 1:
                # (a buffer under 2 GiB: the ids and name spans as three int32 rows, ids
                # ascending, what `LazyStatNames` keeps, no pass over them there: ~60 ms and
                # 16 MB of copies a million stat names; ids in any order, as writers write a
                # map (in hash order on our real H100/H200 captures), placed by id, where
                # `LazyStatNames` sorted a million int64 triples: ~33 ms)
                return _stat_rows32(got, hi, at, distinct)
            return _owned_int64(&got, 3 * n).reshape(n, 3)
        d = {}
        if dense and not ascending:
            # (ids in any order, as writers write a map: each id's last entry, placed by id
            # and read ascending, what `dict(sorted(d.items()))` of the entries gave; that
            # sort of (id, name) tuples was ~a quarter of the split of 10k GPU planes)
            for k in range(hi + 1):
                if at[k] >= 0:
                    i = at[k]
                    d[k] = _name_of(b, k, got[3 * i + 1], got[3 * i + 2], seen)
            return seen.same_map(d)
        for i in range(n):
            d[got[3 * i]] = _name_of(b, got[3 * i], got[3 * i + 1], got[3 * i + 2], seen)
        if dense:  # (ids written ascending: the map is placed by id too)
            return seen.same_map(d)
        fields = b"".join([PyBytes_FromStringAndSize(<char*>(b + sp[3 * i]),
                                                     sp[3 * i + 2] - sp[3 * i])
                           for i in range(n)])
        return (fields, _written(b, sp, n), d)
    finally:
        free(got)  # (NULL once `_owned_int64` took it)
        free(at)


cdef Py_ssize_t _last_of_each_id(const int64_t* got, Py_ssize_t n, int64_t hi,
                                 Py_ssize_t* at) noexcept nogil:
    """Per id in [0, hi] of the triples (id, name start, name end) `got[0:3n]` (each id in
    that range), the index of its last entry into `at` (hi + 1 slots; -1: none); returns
    how many ids are present. Read ascending, what a stable sort by id keeping the last of
    equal ids gives (upb's map of the entries, `LazyStatNames`' order): the placement both
    `_stat_names`' dict of ids written out of order and `_stat_rows32` read."""
    cdef Py_ssize_t i, m = 0
    cdef int64_t k
    for k in range(hi + 1):
        at[k] = -1
    for i in range(n):
        if at[got[3 * i]] < 0:
            m += 1
        at[got[3 * i]] = i
    return m


cdef object _stat_rows32(const int64_t* got, int64_t hi, const Py_ssize_t* at, Py_ssize_t m):
    """The triples `got` placed by id (`at`, `m` ids present: `_last_of_each_id`) as an
    int32 array of three rows: per id present, ascending, its last entry."""
    out_a = np.empty((3, m), np.int32)
    cdef int32_t[:, ::1] out = out_a
    cdef Py_ssize_t i, j = 0
    for i in range(hi + 1):
        if at[i] >= 0:
            out[0, j] = <int32_t>i
            out[1, j] = <int32_t>got[3 * at[i] + 1]
            out[2, j] = <int32_t>got[3 * at[i] + 2]
            j += 1
    return out_a


# The most stat names `_stat_names` keeps one object of per space (~5 MiB of table).
cdef Py_ssize_t _INTERN_MAX = 1 << 16


cdef class _Seen:
    """The stat names a split has met (`_stat_names`): `names`, each one object (new ones
    added up to `_INTERN_MAX`); `by_id`, per stat id (below `_BY_ID_MAX`), the name the
    last plane that had the id named it by, where `names` holds it; `last_map`, the last
    plane's map of them (`same_map`)."""

    cdef dict names
    cdef list by_id
    cdef dict last_map

    def __cinit__(self):
        self.names = {}
        self.by_id = []
        self.last_map = None

    cdef dict same_map(self, dict d):
        """`d`, or the last plane's map where that one is equal: a TPU host file's chips (and
        a GPU file's planes) carry the same stat metadata, a map each (4,096 chips of 12
        names: 2.4 MiB of the split's answer); read-only, as every plane's map is. The maps
        compared are dense ones, placed ascending by id: equal maps hold their keys in the
        same order. (Names are the space's one object each: compared by identity first.)"""
        cdef dict last = self.last_map
        if last is not None and len(last) == len(d) and last == d:
            return last
        self.last_map = d
        return d


cdef Py_ssize_t _BY_ID_MAX = 4096  # (ids of a dense map of at most `LAZY_STAT_NAMES`)


cdef object _name_of(const uint8_t* b, int64_t k, Py_ssize_t ns, Py_ssize_t ne, _Seen seen):
    """The name [ns, ne) of `b` (valid UTF-8) of a plane's stat id `k`, as the space's one
    object of it: a name an earlier plane of the space has is that plane's object (GPU
    planes carry the same stat names, a copy each: 10k planes of ~20 entries, ~11 MiB of
    `str`). Where the last plane with the id `k` named it by the same ASCII bytes, that
    object without a decode or a hash (GPU planes write the same map, id for id: the
    decode and the lookup were ~a third of the split of 10k planes); else the name decoded
    and looked up among those met, added while they are under `_INTERN_MAX` (a bound on
    what the table itself costs where the names are many and all differ)."""
    cdef Py_ssize_t ln = ne - ns
    cdef list by_id = seen.by_id
    cdef object prev
    if 0 <= k < PyList_GET_SIZE(by_id):
        prev = <object>PyList_GET_ITEM(by_id, k)
        if prev is not None and PyUnicode_IS_ASCII(prev) and PyUnicode_GET_LENGTH(prev) == ln \
                and memcmp(PyUnicode_DATA(prev), b + ns, ln) == 0:
            return prev
    t = PyUnicode_DecodeUTF8(<char*>(b + ns), ln, NULL)
    names = seen.names
    if len(names) >= _INTERN_MAX:
        return names.get(t, t)
    t = names.setdefault(t, t)
    if 0 <= k < _BY_ID_MAX:
        if k >= PyList_GET_SIZE(by_id):
            by_id.extend([None] * (k + 1 - PyList_GET_SIZE(by_id)))
        by_id[k] = t
    return t


cdef list _written(const uint8_t* b, const int64_t* sp, Py_ssize_t n):
    """The entries' ids in the order written (duplicates included; every entry plain)."""
    cdef Py_ssize_t i, ns, ne
    cdef int64_t k
    out = []
    for i in range(n):
        _stat_entry(b, sp[3 * i + 1], sp[3 * i + 2], &k, &ns, &ne)
        out.append(k)
    return out


cdef object _owned_int64(int64_t** p, Py_ssize_t n):
    """An int64 array of the first `n` values of the malloc'd block *p, which it takes over
    (shrunk to them; freed with the array's last view; *p is set to NULL). Why: the entry
    spans were copied into a new array (108k entries on the many-ops capture: 1.7 MB written
    twice, ~420 more pages faulted in)."""
    return _owned(<void**>p, n, sizeof(int64_t), _I64_FORMAT, np.int64)


cdef object _owned(void** p, Py_ssize_t n, Py_ssize_t itemsize, str fmt, object dtype):
    """`_owned_int64` of n values of `itemsize` bytes, buffer format `fmt` (numpy's `dtype`)."""
    if n == 0:
        return np.empty(0, dtype)
    cdef cvarray a = cvarray(shape=(n,), itemsize=itemsize, format=fmt, allocate_buffer=False)
    cdef void* q = realloc(p[0], n * itemsize)
    if q == NULL:  # (a block that could not shrink is still whole)
        q = p[0]
    p[0] = NULL
    a.data = <char*>q
    a.callback_free_data = free
    return np.asarray(a)


# The buffer format of an int64 as numpy names it (`np.dtype(np.int64).char`: "l" where C long
# is 8 bytes, else "q"), so that `_owned_int64`'s arrays have exactly numpy's int64 dtype.
_I64_FORMAT = np.dtype(np.int64).char
_U64_FORMAT = np.dtype(np.uint64).char


cdef Py_ssize_t _head_varint(const uint8_t* b, Py_ssize_t p, Py_ssize_t lim, uint64_t* v,
                             bint* big) noexcept nogil:
    """`files._varint` of b[p:lim]: the index after the varint (at most 10 bytes), -1 where
    it does not end there; *big where its value is 2**64 or more (Python's int holds it)."""
    cdef uint64_t c, out = 0
    cdef int shift = 0
    big[0] = False
    while p < lim and shift < 70:
        c = b[p]
        if shift == 63 and (c & 0x7F) > 1:
            big[0] = True
        if shift < 64:
            out |= (c & 0x7F) << shift
        p += 1
        if not c & 0x80:
            v[0] = out
            return p
        shift += 7
    return -1


def top_fields(const uint8_t[::1] blk, Py_ssize_t at, Py_ssize_t size):
    """`files._fields` over `blk`, the file's bytes from offset `at` (`size`: the file's):
    (starts, ends, whether each is a plane (a field 1 of wire type 2), as int64 arrays; the
    offset to read on from), or None where the top level does not parse as fields. A field
    is read where its first 128 bytes (or the file's rest) lie in `blk`, its tag and length
    from those alone, as `files._fields` reads them; the caller reads on from the offset
    returned. Why: in Python, ~1.3 us a field (100k planes in a capture of small ones)."""
    cdef Py_ssize_t n = blk.shape[0], p = 0, q, lim
    cdef const uint8_t* b = &blk[0] if n else NULL
    cdef uint64_t tag, v
    cdef bint big, tbig
    cdef int wt
    cdef int64_t end
    cdef _I64s st = _I64s(), en = _I64s(), pl = _I64s()
    while at + p < size:
        if p + 128 > n and at + n < size:
            break  # (read on from here)
        lim = min(p + 128, n)
        q = _head_varint(b, p, lim, &tag, &tbig)
        if q < 0 or not (tbig or tag >> 3):
            return None
        wt = tag & 7
        if wt == 0:
            q = _head_varint(b, q, lim, &v, &big)
            if q < 0:
                return None
            end = at + q
        elif wt == 1 or wt == 5:
            end = at + q + (8 if wt == 1 else 4)
        elif wt == 2:
            q = _head_varint(b, q, lim, &v, &big)
            if q < 0 or big or v > <uint64_t>size:
                return None
            end = at + q + <int64_t>v
        else:  # groups: no producer writes them in an XSpace
            return None
        if end > size:
            return None
        st.push(at + p)
        en.push(end)
        pl.push(1 if tag == 10 and not tbig else 0)
        p = end - at
    return st.taken(), en.taken(), pl.taken(), at + p


def split_space(data, Py_ssize_t n, strip_meta=None, Py_ssize_t lazy_min=-1,
                tuple line_prefixes=(), bint bare=True):
    """XSpace bytes data[:n] -> (skeleton XSpace bytes without lines, per plane its
    (stripped, bad, meta, stats) from `_plane`, the lines of every plane as `_LineRecs.taken` gives
    them (their names' marks by `line_prefixes`, at most 4 bytes prefixes), (entry starts,
    entry ends) of every plane's event_metadata map entries (int32 where the buffer is under
    2 GiB, `_Pos`), (line
    bounds, entry bounds): plane i's lines are records [line_bounds[i], line_bounds[i + 1]),
    its entries [entry_bounds[i], entry_bounds[i + 1]), per plane its stat metadata as
    `_stat_names` gives it: never in the skeleton). Raises Corrupt on bytes upb would refuse
    in the parts walked here. `meta` is a plane's entries decoded as
    `decode_meta(narrow=(the buffer is under 2 GiB))` gives them where the plane was
    stripped, else None (and None where `strip_meta` answered 2: the entries stripped and
    checked, not kept; 3 and 4: stripped only where they are many, `META_STRIP_MIN` and
    `SKELETON_STRIP_MIN`). A plane's `stripped` is its mode: 0, 1 or 2. Last, where `bare`
    and a plane is bare (`BARE_MODE`: then not in the skeleton), (per plane its name, None
    where not bare; per plane its id, an int64 array), else None.

    Why blocks for all planes, not arrays and tuples per plane: a capture of 100k small
    planes paid ~2 KiB a plane in per-plane arrays (204 MiB for a 6.9 MB file) and a numpy
    call per plane wherever they were read; the reader reads the blocks' columns once."""
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* b = &mv[0]
    cdef Py_ssize_t p = 0, fs, vp, q, run = 0
    cdef uint64_t fn
    cdef int wt
    if n > mv.shape[0]:
        raise ValueError("n beyond the buffer")
    skel = []
    planes = []
    stat_names = []
    # (positions in the buffer as int32 below 2 GiB: `WIDE_POSITIONS`)
    cdef bint wide = mv.shape[0] > WIDE_POSITIONS
    cdef _LineRecs lines = _LineRecs(line_prefixes, wide)
    # (entry spans int32 where the buffer is under 2 GiB: `_Pos`)
    cdef _Pos starts = _Pos(wide), ends = _Pos(wide)
    cdef _I64s line_bounds = _I64s(), entry_bounds = _I64s()
    cdef _I64s sspans = _I64s()
    cdef _Seen seen = _Seen()  # stat names met, each one object (`_stat_names`)
    cdef int gpu_mode = 0  # (`_GPU_MODE`: 0, none said)
    cdef int64_t pid
    cdef _I64s ids = _I64s()  # (per plane, a bare plane's id: `BARE_MODE`)
    bare_names = []  # (per plane, a bare plane's name, else None)
    cdef Py_ssize_t n_bare = 0
    got_mode = getattr(strip_meta, _GPU_MODE, None) if strip_meta is not None else None
    if type(got_mode) is int and (got_mode == 2 or got_mode == 3):
        gpu_mode = got_mode
    line_bounds.push(0)
    entry_bounds.push(0)
    while p < n:
        fs = p
        p = _tag(b, p, n, &fn, &wt)
        if p < 0:
            raise _fail(p)
        if fn == 1 and wt == 2:
            vp = _len(b, p, n, &q)
            if vp < 0:
                raise _fail(vp)
            if fs > run:
                skel.append(PyBytes_FromStringAndSize(<char*>(b + run), fs - run))
            parts, got, names, name, pid = _plane(mv, vp, q, strip_meta, lines, starts, ends,
                                                  sspans, lazy_min, seen, gpu_mode, bare)
            if name is None:
                skel.append(b"\x0a" + enc_varint(sum([len(x) for x in parts])))
                skel.extend(parts)
            else:
                n_bare += 1
            bare_names.append(name)
            ids.push(pid)
            planes.append(got)
            stat_names.append(names)
            line_bounds.push(lines.n)
            entry_bounds.push(starts.n)
            run = q
            p = q
        else:
            p = _skip(b, p, n, wt, fn, D_SPACE)
            if p < 0:
                raise _fail(p)
    if n > run:
        skel.append(PyBytes_FromStringAndSize(<char*>(b + run), n - run))
    return (b"".join(skel), planes, lines.taken(b), (starts.taken(), ends.taken()),
            (line_bounds.taken(), entry_bounds.taken()), stat_names,
            (bare_names, ids.taken()) if n_bare else None)


# ---------------------------------------------------------------------------------------------
# Stats


@cython.final  # (methods called directly, inlined into the walks: no vtable)
cdef class _Stats:
    """Growable typed stat records (written through raw pointers: a typed memoryview read off
    `self` costs reference counting per access, more than the write itself)."""
    cdef public object ev, sid, kind, ival, vpos
    cdef int32_t* p_ev
    cdef int64_t* p_sid
    cdef int8_t* p_kind
    cdef uint64_t* p_ival
    cdef int64_t* p_vpos
    cdef Py_ssize_t n, cap

    def __cinit__(self, Py_ssize_t cap):
        self.n = 0
        self._alloc(max(cap, 16))

    cdef int _alloc(self, Py_ssize_t cap) except -1:
        cdef int32_t[::1] a
        cdef int64_t[::1] b, e
        cdef int8_t[::1] c
        cdef uint64_t[::1] d
        old = (self.ev, self.sid, self.kind, self.ival, self.vpos) if self.n else None
        self.ev = np.empty(cap, np.int32)
        self.sid = np.empty(cap, np.int64)
        self.kind = np.empty(cap, np.int8)
        self.ival = np.empty(cap, np.uint64)
        self.vpos = np.empty(cap, np.int64)
        if old is not None:
            for new, o in zip((self.ev, self.sid, self.kind, self.ival, self.vpos), old):
                new[:self.n] = o[:self.n]
        a, b, c, d, e = self.ev, self.sid, self.kind, self.ival, self.vpos
        self.p_ev, self.p_sid, self.p_kind, self.p_ival, self.p_vpos = (
            &a[0], &b[0], &c[0], &d[0], &e[0])
        self.cap = cap
        return 0

    cdef inline int push(self, int32_t ev, int64_t sid, int8_t kind, uint64_t ival,
                         int64_t vpos) except -1:
        cdef Py_ssize_t i = self.n
        if i == self.cap:
            self._alloc(self.cap * 2)
        self.p_ev[i] = ev
        self.p_sid[i] = sid
        self.p_kind[i] = kind
        self.p_ival[i] = ival
        self.p_vpos[i] = vpos
        self.n = i + 1
        return 0

    def arrays(self):
        k = self.n
        # views, never copies: capacity never written was never backed by memory (np.empty)
        return {"ev": self.ev[:k], "sid": self.sid[:k], "kind": self.kind[:k],
                "ival": self.ival[:k], "vpos": self.vpos[:k]}


cdef inline Py_ssize_t _stat(const uint8_t* b, Py_ssize_t p, Py_ssize_t e, int64_t* sid,
                             int8_t* kind, uint64_t* ival, int64_t* vpos) noexcept nogil:
    """Decode one XStat payload [p, e): 0, or an error code."""
    cdef uint64_t fn, v
    cdef int wt
    cdef Py_ssize_t q, vp
    sid[0] = 0
    kind[0] = 0
    ival[0] = 0
    vpos[0] = 0
    while p < e:
        p = _tag(b, p, e, &fn, &wt)
        if p < 0:
            return p
        if wt == 0 and (fn == 1 or fn == 3 or fn == 4 or fn == 7):
            vp = p
            p = _varint(b, p, e, &v)
            if p < 0:
                return p
            if fn == 1:
                sid[0] = <int64_t>v
            else:
                kind[0] = <int8_t>fn
                ival[0] = v
                vpos[0] = vp
        elif wt == 1 and fn == 2:
            if p + 8 > e:
                return E_PAST
            v = 0
            for q in range(8):
                v |= (<uint64_t>b[p + q]) << (8 * q)
            kind[0] = 2
            ival[0] = v
            vpos[0] = p
            p += 8
        elif wt == 2 and (fn == 5 or fn == 6):
            vp = _len(b, p, e, &q)
            if vp < 0:
                return vp
            kind[0] = <int8_t>fn
            ival[0] = <uint64_t>(q - vp)
            vpos[0] = vp
            p = q
        else:
            p = _skip(b, p, e, wt, fn, D_STAT)
            if p < 0:
                return p
    return 0


cdef Py_ssize_t _event_check(const uint8_t* b, Py_ssize_t p, Py_ssize_t e,
                             int* bad) noexcept nogil:
    """Check one XEvent message [p, e) as upb would (adding its string stats with invalid
    UTF-8 to `bad`): 0, or an error code."""
    cdef uint64_t fn, v, ival
    cdef int wt
    cdef Py_ssize_t q, rc
    cdef int64_t sid, vpos
    cdef int8_t kind
    while p < e:
        p = _tag(b, p, e, &fn, &wt)
        if p < 0:
            return p
        if wt == 2 and fn == 4:
            q = _len(b, p, e, &p)
            if q < 0:
                return q
            rc = _stat(b, q, p, &sid, &kind, &ival, &vpos)
            if rc < 0:
                return rc
            if kind == 5 and not _utf8_ok(b + vpos, <Py_ssize_t>ival):
                bad[0] += 1
        else:
            p = _skip(b, p, e, wt, fn, D_EVENT)
            if p < 0:
                return p
    return 0


cdef Py_ssize_t _entry_decode(const uint8_t* b, Py_ssize_t p, Py_ssize_t e, int* bad,
                              int64_t* o8, int64_t* tails) noexcept nogil:
    """Check one event_metadata map entry [p, e) (key, XEventMetadata value) as upb would,
    adding to `bad` its strings with invalid UTF-8 (name and display name as written last in
    each value, string stats), and in the same walk what `_meta_entry` reads of it into `o8`:
    key, value start and end, name start and end, display name start and end (0, 0 where
    absent), and 1 where the table may take the entry, 0 where `_meta_entry` refuses it (a
    field other than the key and the value, a value written twice): 0, or an error code."""
    cdef uint64_t fn, v
    cdef int wt
    cdef Py_ssize_t vs, ve, rc, q, nval = 0
    cdef int64_t sp[4]
    o8[0] = o8[1] = o8[2] = o8[3] = o8[4] = o8[5] = o8[6] = 0
    o8[7] = 1
    while p < e:
        p = _tag(b, p, e, &fn, &wt)
        if p < 0:
            return p
        if fn == 2 and wt == 2:  # the value (as `_next_field` finds it)
            vs = _len(b, p, e, &ve)
            if vs < 0:
                return vs
            rc = _value_check(b, vs, ve, bad, sp, tails)
            if rc < 0:
                return rc
            nval += 1
            o8[1], o8[2] = vs, ve
            o8[3] = o8[4] = o8[5] = o8[6] = 0
            if sp[0] >= 0:
                o8[3], o8[4] = sp[0], sp[1]
            if sp[2] >= 0:
                o8[5], o8[6] = sp[2], sp[3]
            p = ve
        elif fn == 1 and wt == 0:  # the key (read once: `_skip` would read it too)
            p = _varint(b, p, e, &v)
            if p < 0:
                return p
            o8[0] = <int64_t>v
        else:
            p = _skip(b, p, e, wt, fn, D_LINE)
            if p < 0:
                return p
            o8[7] = 0
    if nval > 1:
        o8[7] = 0
    return 0


cdef inline int _tail_slot(const uint8_t* b, Py_ssize_t t, Py_ssize_t n, const int64_t* tails,
                           int stride) noexcept nogil:
    """The slot of `tails` (`_TAILS` slots of `stride` values, each its tail's start and
    length first) whose tail is byte for byte the n bytes at b + t; -1 where none is
    (`_value_check`'s and `_meta_value`'s kept tails)."""
    cdef int j
    for j in range(_TAILS):
        if tails[stride * j + 1] == n and memcmp(b + t, b + tails[stride * j], <size_t>n) == 0:
            return j
    return -1


cdef Py_ssize_t _value_check(const uint8_t* b, Py_ssize_t vs, Py_ssize_t ve, int* bad,
                             int64_t* sp, int64_t* tails) noexcept nogil:
    """Check one XEventMetadata message [vs, ve) as upb would (`_entry_decode`); its name's
    and display name's spans as written last into sp[0:2], sp[2:4] (-1 where absent).
    `tails` (2 * `_TAILS` + 1 values: start, length pairs, -1 lengths where empty, then the
    next pair to replace): the last tails met (a value's bytes from its first stat field's
    tag to its end) that checked clean: no error, no name or display name in them, no
    string counted. A value whose tail is byte for byte one of those is checked up to it:
    the same bytes at the same depth read the same, so the tail would check clean again.
    Why: the ops of a plane repeat their stats (category, program, sizes, shapes: the
    many-ops capture's 108k values hold 5 distinct tails of 46-114 bytes), and walking
    them field by field was about half of `split_space`'s time there; a tail that differs
    costs length compares and a memcmp up to its first differing byte."""
    cdef uint64_t fn, v, ival
    cdef int wt2, bad0 = 0
    cdef Py_ssize_t q, rc, tp, ns = -1, ne = 0, ds = -1, de = 0, t0 = -1
    cdef int64_t sid, vpos, j
    cdef int8_t kind
    cdef bint seen = False, clean = True
    while vs < ve:  # the XEventMetadata
        tp = vs
        vs = _tag(b, vs, ve, &fn, &wt2)
        if vs < 0:
            return vs
        if wt2 == 2 and (fn == 2 or fn == 3 or fn == 4 or fn == 5 or fn == 6):
            if fn == 5 and t0 < 0:  # the tail begins
                t0 = tp
                if _tail_slot(b, t0, ve - t0, tails, 2) >= 0:
                    seen = True
                    break
                bad0 = bad[0]
            q = _len(b, vs, ve, &vs)
            if q < 0:
                return q
            if fn == 2:
                ns, ne = q, vs
                clean = clean and t0 < 0
            elif fn == 4:
                ds, de = q, vs
                clean = clean and t0 < 0
            elif fn == 5:
                rc = _stat(b, q, vs, &sid, &kind, &ival, &vpos)
                if rc < 0:
                    return rc
                if kind == 5 and not _utf8_ok(b + vpos, <Py_ssize_t>ival):
                    bad[0] += 1
            elif fn == 6:  # packed child ids: each varint must be whole
                while q < vs:
                    q = _varint(b, q, vs, &v)
                    if q < 0:
                        return q
        elif wt2 == 0:  # the id (as `_skip` reads a varint, without a call per value)
            vs = _varint(b, vs, ve, &v)
            if vs < 0:
                return vs
        else:
            vs = _skip(b, vs, ve, wt2, fn, D_EVENT)
            if vs < 0:
                return vs
    if t0 >= 0 and not seen and clean and bad[0] == bad0:  # a new clean tail: kept
        j = tails[2 * _TAILS]
        tails[2 * j] = t0
        tails[2 * j + 1] = ve - t0
        tails[2 * _TAILS] = (j + 1) % _TAILS
    if ns >= 0 and not _utf8_ok(b + ns, ne - ns):
        bad[0] += 1
    if ds >= 0 and not _utf8_ok(b + ds, de - ds):
        bad[0] += 1
    sp[0], sp[1], sp[2], sp[3] = ns, ne, ds, de
    return 0


cdef inline Py_ssize_t _next_field(const uint8_t* b, Py_ssize_t p, Py_ssize_t e, uint64_t want,
                                   Py_ssize_t* fs, Py_ssize_t* fe) noexcept nogil:
    """From `p` in a message's payload [p, e): the next length-delimited field number `want`
    as [fs, fe), skipping the other fields as upb would (at a line's depth); returns where the
    message goes on (fe), or `e` with fs = -1 when no such field is left, or a negative
    `_fail` code. The one walk of a line's events (`_next_event`)."""
    cdef uint64_t fn
    cdef int wt
    fs[0] = -1
    while p < e:
        p = _tag(b, p, e, &fn, &wt)
        if p < 0:
            return p
        if not (fn == want and wt == 2):
            p = _skip(b, p, e, wt, fn, D_LINE)
            if p < 0:
                return p
            continue
        p = _len(b, p, e, fe)
        if p < 0:
            return p
        fs[0] = p
        return fe[0]
    return p


cdef inline Py_ssize_t _next_event(const uint8_t* b, Py_ssize_t p, Py_ssize_t e,
                                   Py_ssize_t* es, Py_ssize_t* ee) noexcept nogil:
    """The next XEvent (field 4) of a line's payload (`_next_field`): what `check_events`,
    `decode_events` and `decode_events_at` walk."""
    return _next_field(b, p, e, 4, es, ee)


ctypedef fused _pos_t:  # (positions as a block's columns hold them: int32 or int64)
    int32_t
    int64_t


def check_events(data, const _pos_t[::1] starts, const _pos_t[::1] ends):
    """Check the events of lines whose payloads are [starts[i], ends[i]) as upb would, for
    lines no rule decodes (`decode_events` checks the others as it goes): raises Corrupt
    where upb would refuse them; returns how many string stats hold invalid UTF-8. The
    positions int32 or int64, both alike (a block's columns read in place)."""
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* b = &mv[0]
    cdef Py_ssize_t i, p, e, es, ee, rc
    cdef uint64_t fn
    cdef int wt, bad = 0
    for i in range(starts.shape[0]):
        p = starts[i]
        e = ends[i]
        while p < e:
            p = _next_event(b, p, e, &es, &ee)
            if p < 0:
                raise _fail(p)
            if es < 0:
                break  # the line holds no more events
            rc = _event_check(b, es, ee, &bad)
            if rc < 0:
                raise _fail(rc)
    return bad


cdef inline Py_ssize_t _find(const int64_t* a, Py_ssize_t n, int64_t x) noexcept nogil:
    """Where x is in the sorted array a[:n], or -1."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < n and a[lo] == x else -1


cdef inline bint _in(const int64_t* a, Py_ssize_t n, int64_t x) noexcept nogil:
    """Is x in the sorted array a[:n]?"""
    return _find(a, n, x) >= 0


cdef inline uint64_t _mix(uint64_t h) noexcept nogil:
    h ^= h >> 33
    h *= 0xff51afd7ed558ccdULL
    h ^= h >> 33
    h *= 0xc4ceb9fe1a85ec53ULL
    h ^= h >> 33
    return h


cdef inline uint64_t _hash_value(const uint8_t* b, int8_t kind, uint64_t ival,
                                 int64_t vpos) noexcept nogil:
    """A hash of a stat value: strings and bytes by their content (`ival` is the length),
    everything else by its kind and integer (or double's bits)."""
    cdef uint64_t h = (<uint64_t>(<uint8_t>kind) + 1) * 0x9E3779B97F4A7C15ULL
    cdef uint64_t w
    cdef const uint8_t* s
    cdef Py_ssize_t n, i
    if kind != 5 and kind != 6:
        return _mix(h ^ ival)
    s = b + vpos
    n = <Py_ssize_t>ival
    i = 0
    while i + 8 <= n:  # a word at a time: kernel_details strings are ~100 bytes each
        memcpy(&w, s + i, 8)
        h = (h ^ w) * 0x9E3779B97F4A7C15ULL
        h ^= h >> 29
        i += 8
    if i < n:
        w = 0
        memcpy(&w, s + i, n - i)
        h = (h ^ w) * 0x9E3779B97F4A7C15ULL
    return _mix(h ^ ival)


cdef void* _resized(void* p, size_t nbytes) except NULL:
    """`realloc`, or MemoryError (the old block then stays its owner's, freed as before)."""
    cdef void* q = realloc(p, nbytes)
    if not q:
        raise MemoryError()
    return q


# `_Intern`'s slots: 0 empty, else its value's index + 1, under the top 8 bits of its hash
# while the table has room for at most `TAGGED_CAP` values (the index + 1 then fits in 24
# bits; a test lowers it to read the untagged slots of a larger table).
TAGGED_CAP = 1 << 23


cdef inline uint32_t _tagmask(Py_ssize_t cap, Py_ssize_t tag_cap) noexcept nogil:
    """A table's tag mask: the slots' top 8 bits while it has room for at most `tag_cap`
    values, else 0 (untagged)."""
    return 0xFF000000U if cap <= tag_cap else 0


cdef inline uint32_t _hash_tag(uint64_t h, uint32_t tagmask) noexcept nogil:
    """The hash's top 8 bits in a slot's top 8, where `tagmask` keeps them (0: none)."""
    return (<uint32_t>(h >> 56) << 24) & tagmask


cdef inline uint32_t _slot(uint64_t h, Py_ssize_t j, uint32_t tagmask) noexcept nogil:
    """The slot of value j of hash h: j + 1 under its tag (`_hash_tag`)."""
    return _hash_tag(h, tagmask) | <uint32_t>(j + 1)


# The values a table that may list (`_Intern(may_list=True)`) has coded before it may stop
# looking them up: below this a table is small, and a lookup cheap.
cdef Py_ssize_t _LIST_MIN = 1 << 16


@cython.final
cdef class _Intern:
    """The distinct values of one stat group: each value's kind, integer (double bits, string
    length) and, for strings and bytes, where its first occurrence lies, in order of first
    occurrence; `code` gives a value's index, adding it if new. Open addressing over the
    values' hashes (strings compare by content, never by position).

    A number (any kind but strings and bytes) above every earlier one of its kind is new
    without a lookup: it is added and left out of the slots (`slotted`: the values [0,
    slotted) are in them; -1: there are none), which take the values left out only when a
    lookup needs them (`_settle`). Why: refs to a million stat names, one per copy in the
    order of the names (CUPTI's form), each missed the cache on a slot of a table twice
    their size to find none there (~100 ms of a 0.45 s report), and that table was 8 MB on
    the decode's peak; ids that only grow (correlation ids) are alike.

    A slot holds its value's index under 8 bits of its hash (`_slot`), in 4 bytes as the
    index alone did: a probe passes another value's slot without reading that value's hash
    (a cache miss per occupied slot probed, ~1 a value where a million texts all differ).
    Both cost a lookup a few instructions: +1.1% on the compact GPU 1M file, whose kernels'
    values are found by lookups, in the same time.

    A table made with `may_list` (a group whose reader takes repeated values: each event's
    code still gives its own value) stops looking values up once three in four coded were
    new (`_grow`, from `_LIST_MIN` values): each later value is appended (`_list`), and two
    codes may then give equal values. Only a run of one value is still one code (`last`)."""
    cdef int8_t* kind
    cdef uint64_t* ival
    cdef int64_t* vpos
    cdef uint64_t* hash
    cdef uint32_t* slots  # (NULL until a lookup needs them, and `slotted` -1; `_slot`)
    cdef Py_ssize_t n, cap, nslots, slotted, tag_cap
    cdef uint32_t tagmask  # (0xFF000000 while the slots are tagged: `cap` <= `tag_cap`; else 0)
    cdef int32_t last  # the value returned last: runs of events repeat one value
    # whether a string or bytes value was added: until then no position is written (a
    # number's is never read; a million refs' would be 8 MB on the read's peak), and
    # `arrays` gives zeros for them
    cdef bint texts
    # per number kind, one more than its largest integer so far (0: none yet; a value of
    # 2**64 - 1 is always looked up, and never moves it)
    cdef uint64_t above[8]
    # `may_list`: the caller takes a table whose values may repeat (each code still gives
    # its event's value): where most values coded are new (`_grow`), the table stops looking
    # values up and lists each one (`listing`). `calls`: the values coded so far.
    cdef bint may_list, listing
    cdef Py_ssize_t calls

    def __cinit__(self, bint may_list=False):
        self.n = 0
        self.may_list = may_list
        self.listing = False
        self.calls = 0
        self.texts = False
        self.slotted = -1
        self.tag_cap = min(TAGGED_CAP, 1 << 23)
        self.last = -1
        self.cap = 16
        self.tagmask = _tagmask(self.cap, self.tag_cap)
        self.nslots = 64
        self.kind = <int8_t*>malloc(self.cap * sizeof(int8_t))
        self.ival = <uint64_t*>malloc(self.cap * sizeof(uint64_t))
        self.vpos = <int64_t*>malloc(self.cap * sizeof(int64_t))
        self.hash = <uint64_t*>malloc(self.cap * sizeof(uint64_t))
        self.slots = NULL
        memset(self.above, 0, sizeof(self.above))
        if not (self.kind and self.ival and self.vpos and self.hash):
            raise MemoryError()

    def __dealloc__(self):
        free(self.kind)
        free(self.ival)
        free(self.vpos)
        free(self.hash)
        free(self.slots)

    cdef int _grow(self) except -1:
        cdef Py_ssize_t cap = self.cap * 2
        if (self.may_list and not self.listing and self.n >= _LIST_MIN
                and self.n * 4 >= self.calls * 3):
            # Three values in four new: a lookup finds nearly nothing (a million copies, each
            # its own details text: ~90 ms of cache misses on the slots, and 16 bytes a value
            # of hashes and slots on the decode's peak). From here each value is listed.
            self.listing = True
            free(self.hash)
            free(self.slots)
            self.hash, self.slots, self.slotted = NULL, NULL, -1
        self.kind = <int8_t*>_resized(self.kind, cap * sizeof(int8_t))
        self.ival = <uint64_t*>_resized(self.ival, cap * sizeof(uint64_t))
        self.vpos = <int64_t*>_resized(self.vpos, cap * sizeof(int64_t))
        self.cap = cap
        if self.listing:  # (no hashes, no slots)
            return 0
        self.hash = <uint64_t*>_resized(self.hash, cap * sizeof(uint64_t))
        self.tagmask = _tagmask(cap, self.tag_cap)
        # slots: at most half full (the table grows when `n` reaches `cap`). (Four slots a
        # value were 16 MB beside a million distinct values' 25 MB, on the decode's peak.)
        free(self.slots)
        self.slots = NULL
        self.nslots = cap * 2
        if self.slotted > 0:  # (none yet: made when a lookup first needs them)
            self._slot_range(0, self.slotted)
        else:
            self.slotted = -1
        return 0

    cdef int _slot_range(self, Py_ssize_t a, Py_ssize_t z) except -1:
        """Put the values [a, z) in the slots (made, empty, where there are none)."""
        cdef Py_ssize_t i, j, mask = self.nslots - 1
        if self.slots == NULL:
            self.slots = <uint32_t*>calloc(self.nslots, sizeof(uint32_t))  # (0: empty)
            if not self.slots:
                raise MemoryError()
        for j in range(a, z):
            if j >= self.slotted:  # (a number added without a lookup: its hash not kept)
                self.hash[j] = _hash_value(NULL, self.kind[j], self.ival[j], 0)
            i = <Py_ssize_t>(self.hash[j] & <uint64_t>mask)
            while self.slots[i]:
                i = (i + 1) & mask
            self.slots[i] = _slot(self.hash[j], j, self.tagmask)
        return 0

    cdef inline int _settle(self) except -1:
        """Every value in the slots (those added without a lookup too)."""
        if self.slotted != self.n:
            self._slot_range(max(self.slotted, 0), self.n)
            self.slotted = self.n
        return 0

    cdef inline int32_t _add(self, int8_t kind, uint64_t ival, int64_t vpos) except -1:
        """Append a value known to be new (not put in the slots, its hash not written: a
        number's is made from it when the slots take it, and pages never written are never
        backed: 8 MB less on the decode's peak of a million refs)."""
        if self.n == self.cap:
            self._grow()
        cdef int32_t s = <int32_t>self.n
        self.kind[s] = kind
        self.ival[s] = ival
        if self.texts:
            self.vpos[s] = vpos
        self.n += 1
        self.last = s
        return s

    cdef inline int32_t code(self, const uint8_t* b, int8_t kind, uint64_t ival,
                             int64_t vpos) except -1:
        cdef bint text = kind == 5 or kind == 6
        cdef int32_t s = self.last
        self.calls += 1
        if (s >= 0 and self.kind[s] == kind and self.ival[s] == ival
                and (not text or memcmp(b + self.vpos[s], b + vpos, <size_t>ival) == 0)):
            return s
        if self.listing:
            return self._list(kind, ival, vpos)
        cdef int k = kind & 7
        if not text and ival >= self.above[k] and ival != 0xFFFFFFFFFFFFFFFFULL:
            # above every number of its kind so far: new, and no slot looked at
            self.above[k] = ival + 1
            return self._add(kind, ival, vpos)
        cdef uint64_t h = _hash_value(b, kind, ival, vpos)
        self._settle()
        cdef uint32_t v, tm = self.tagmask
        cdef uint32_t tag = _hash_tag(h, tm)
        cdef Py_ssize_t mask = self.nslots - 1
        cdef Py_ssize_t i = <Py_ssize_t>(h & <uint64_t>mask)
        while True:
            v = self.slots[i]
            if not v:
                break
            # (another value's tag: passed over without reading its hash or bytes; untagged,
            # `tm` is 0 and every slot is looked at)
            if (v & tm) == tag:
                s = <int32_t>((v & ~tm) - 1)
                if (self.hash[s] == h and self.kind[s] == kind and self.ival[s] == ival
                        and (not text or memcmp(b + self.vpos[s], b + vpos,
                                                <size_t>ival) == 0)):
                    self.last = s
                    return s
            i = (i + 1) & mask
        if self.n == self.cap:
            self._grow()  # (every value was slotted above: the new slots hold them all)
            if self.listing:
                return self._list(kind, ival, vpos)
            mask = self.nslots - 1
            i = <Py_ssize_t>(h & <uint64_t>mask)
            while self.slots[i]:
                i = (i + 1) & mask
        if text and not self.texts:  # (the numbers before it: position 0)
            memset(self.vpos, 0, self.n * sizeof(int64_t))
            self.texts = True
        s = self._add(kind, ival, vpos)
        self.hash[s] = h
        self.slots[i] = _slot(h, s, self.tagmask)
        self.slotted = self.n
        return s

    cdef inline int32_t _list(self, int8_t kind, uint64_t ival, int64_t vpos) except -1:
        """Append a value without a lookup (`listing`): it may equal an earlier one."""
        if (kind == 5 or kind == 6) and not self.texts:  # (the numbers before it: position 0)
            memset(self.vpos, 0, self.n * sizeof(int64_t))
            self.texts = True
        return self._add(kind, ival, vpos)

    def arrays(self):
        """The distinct values' kind, ival and vpos (where a string or bytes value lies; 0
        for every value of a group without one), as arrays that take the table's own blocks
        (shrunk to the values'): the table codes nothing after this, and its hashes and
        slots are freed first. Why: a copy of each, beside the table, was 17 MB more on the
        decode's peak with a million distinct values (each copy its own details)."""
        cdef Py_ssize_t k = self.n
        free(self.hash)
        free(self.slots)
        self.hash, self.slots, self.nslots, self.cap = NULL, NULL, 0, 0
        if not self.texts:  # (no position written: zeros, backed only where read)
            free(self.vpos)
            self.vpos = NULL
            vpos = np.zeros(k, np.int64)
        else:
            vpos = _owned(<void**>&self.vpos, k, sizeof(int64_t), _I64_FORMAT, np.int64)
        return {"kind": _owned(<void**>&self.kind, k, sizeof(int8_t), "b", np.int8),
                "ival": _owned(<void**>&self.ival, k, sizeof(uint64_t), _U64_FORMAT, np.uint64),
                "vpos": vpos}


_EMPTY = np.zeros(1, np.int64)
_DIRECT_MAX = 1 << 20  # ids below this get a lookup table (4 bytes each: 4 MB at most)


_NO_TABLE = np.full(1, -1, np.int32)
_NO_CODES = np.zeros((1, 1), np.int32)


def _widened(codes, Py_ssize_t rows):
    """`decode_events`' int8 codes as int32, the first `rows` of each group copied."""
    out = np.empty(codes.shape, np.int32)
    out[:, :rows] = codes[:, :rows]
    return out


def _direct(keys, values, limit):
    """For sorted int64 `keys` all in [0, limit): a table indexed by key holding its value
    (or 0; -1 where not a key). None otherwise (keys are then searched)."""
    # keys[len(keys) - 1], not keys[-1]: this module is compiled with wraparound=False
    if keys is None or not len(keys) or keys[0] < 0 or keys[len(keys) - 1] >= limit:
        return None
    out = np.full(int(keys[len(keys) - 1]) + 1, -1, np.int32)
    out[keys] = 0 if values is None else values
    return out


def decode_events(data, const int64_t[::1] starts, const int64_t[::1] ends, Py_ssize_t total,
                  skip=None, wanted=None, plane_of=None, int64_t stride=0, groups=None,
                  int64_t time_limit=-1, bint drop=False, cond=None, need=None,
                  int64_t ids=-1):
    """The events of lines whose payloads are [starts[i], ends[i]), in order (see the module
    docstring). `skip`, `wanted`: sorted int64 arrays (metadata ids; stat ids, or with
    `plane_of` (per event, its plane's index) the keys `plane * stride + id`, for ids in
    [0, `ids`) (-1: [0, stride)), -1 outside) or None.
    `groups`: None or (sorted int64 stat ids/keys, int32 group index of each, group count
    [, per group 1 where only presence matters, 2 where its values may repeat]): per group,
    each event's first stat whose id is in the group, interned (see the module docstring); a
    presence-only group's code is 0 for any value (kernel_details: ~100-byte strings per
    kernel, only ever tested); a group of flag 2 is interned until most of its values are
    new, then listed (`_Intern(may_list=True)`: a million copies' distinct details texts).
    Returns (mid, offset, duration, aggregated, stats dict of arrays, groups, bad) where groups
    is (codes: int32 [group count, events], -1 where the event has no such stat; per group the
    distinct values: dict of kind, ival, vpos arrays), bad the number of string stats
    (as written last in their XStat) holding invalid UTF-8, and times: None, or with
    `time_limit` >= 0 (raw, neg, big, odd): raw None, or where `drop` left rows out, per row
    its event's index among the lines' events (int64); of the events left out, how many have
    a negative offset or duration (neg), and how many else one >= time_limit (big), each
    positioned; of the rows, how many are aggregated or have such a time (odd: 0 tells the
    reader every row is positioned and possible without a pass over the rows).
    `cond`, `need` (sorted int64 metadata ids; stat ids, not with `plane_of`): with `drop`, an
    event whose metadata id is in `cond` and that carries no stat with an id in `need` is
    skipped as a `skip` one is (a host line of millions of CUDA API calls, of which only
    those carrying a step's `_r` can give a row).
    With `drop` a skipped event writes no row at all (rows, stat records' `ev` and codes
    count the others only; the walk still checks its bytes and counts its invalid strings):
    a host line of a million Python-tracer frames keeps the few thousand events a rule can
    read, and the times the reader would have dropped as impossible are still counted
    (overlap.trace.wire's `TIME_LIMIT_PS` and `INVALID_REASONS`)."""
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* b = &mv[0]
    cdef Py_ssize_t nl = starts.shape[0], i, p, e, q, es, ee, k = 0, st0
    cdef Py_ssize_t row = 0  # rows written: k less the events dropped (`time_limit`)
    if ids < 0 or ids > stride:  # (two keys of one: an id at or above the stride)
        ids = stride
    cdef bint timed = time_limit >= 0
    drop = drop and timed and ((skip is not None and len(skip) > 0)
                               or (cond is not None and len(cond) > 0))
    cdef Py_ssize_t neg = 0, big = 0  # dropped events' impossible times, by reason
    cdef Py_ssize_t odd = 0  # rows aggregated or of an impossible time
    cdef uint64_t fn, v
    cdef int wt, rc
    cdef Py_ssize_t nbad = 0  # string stats with invalid UTF-8 (read with replacement)
    cdef int64_t m, o, d, sid, key, pl = 0
    cdef int8_t kind, a
    cdef uint64_t ival
    cdef int64_t vpos
    skip_a = np.ascontiguousarray(skip if skip is not None and len(skip) else _EMPTY, np.int64)
    want_a = np.ascontiguousarray(wanted if wanted is not None and len(wanted) else _EMPTY,
                                  np.int64)
    cdef const int64_t[::1] sk = skip_a
    # (_EMPTY holds one element, so that &a[0] is always valid: the counts say how many)
    cdef Py_ssize_t nck = len(cond) if drop and cond is not None else 0
    cdef Py_ssize_t nnk = len(need) if nck and need is not None else 0
    cond_a = np.ascontiguousarray(cond if nck else _EMPTY, np.int64)
    need_a = np.ascontiguousarray(need if nnk else _EMPTY, np.int64)
    if nck and plane_of is not None:
        raise ValueError("cond is not read with plane_of")
    cdef const int64_t[::1] ck = cond_a
    cdef const int64_t[::1] nk = need_a
    cdef bint hit  # the event carries a stat of `need`
    cdef const int64_t[::1] wa = want_a
    cdef Py_ssize_t nsk = len(skip) if skip is not None else 0
    cdef Py_ssize_t nwa = len(wanted) if wanted is not None else 0
    cdef bint all_stats = wanted is None
    cdef bint grouped = plane_of is not None
    cdef Py_ssize_t ng = 0, ngk = 0, gi
    cdef int32_t g
    gk_a = _EMPTY
    gg_a = np.zeros(1, np.int32)
    if groups is not None:
        gk_a = np.ascontiguousarray(groups[0], np.int64)
        gg_a = np.ascontiguousarray(groups[1], np.int32)
        ng = groups[2]
        ngk = len(gk_a)
        if len(gg_a) != ngk or (ngk and (gg_a.min() < 0 or gg_a.max() >= ng)):
            raise ValueError("bad stat groups")
        if not ngk:
            gk_a, gg_a = _EMPTY, np.zeros(1, np.int32)
    # per group: 1 where only presence is asked (code 0 for any value: nothing interned)
    only_a = np.zeros(max(ng, 1), np.uint8)
    if groups is not None and len(groups) > 3 and groups[3] is not None:
        only_a[:ng] = np.asarray(groups[3], np.uint8)[:ng]
    cdef const int64_t[::1] gk = gk_a
    cdef const int32_t[::1] gg = gg_a
    cdef const uint8_t[::1] only = only_a
    # Stat and metadata ids are small integers: where they are, a table indexed by the id
    # answers "which group / wanted / skipped" without a binary search (whose data-dependent
    # branches mispredict several times per stat).
    cdef Py_ssize_t ngd = 0, nwd = 0, nsd = 0
    # (a table costs its size to fill: only where it is small next to the events)
    cdef Py_ssize_t dmax = min(_DIRECT_MAX, max(1 << 16, 4 * total))
    gdir_a = _direct(gk_a if ngk else None, gg_a, dmax)
    wdir_a = _direct(want_a if nwa else None, None, dmax)
    sdir_a = _direct(skip_a if nsk else None, None, dmax)
    cdir_a = _direct(cond_a if nck else None, None, dmax)
    ndir_a = _direct(need_a if nnk else None, None, dmax)
    cdef Py_ssize_t ncd = len(cdir_a) if cdir_a is not None else 0
    cdef Py_ssize_t nnd = len(ndir_a) if ndir_a is not None else 0
    cdef const int32_t[::1] cdir = cdir_a if ncd else _NO_TABLE
    cdef const int32_t[::1] ndir = ndir_a if nnd else _NO_TABLE
    ngd = len(gdir_a) if gdir_a is not None else 0  # 0: no table, search the keys
    nwd = len(wdir_a) if wdir_a is not None else 0
    nsd = len(sdir_a) if sdir_a is not None else 0
    cdef const int32_t[::1] gdir = gdir_a if ngd else _NO_TABLE
    cdef const int32_t[::1] wdir = wdir_a if nwd else _NO_TABLE
    cdef const int32_t[::1] sdir = sdir_a if nsd else _NO_TABLE
    # each row's codes are written once, at its event's end, from `ec` (an event's codes
    # while its stats are read): reading and writing them in place was a cache miss per
    # stat of a group, ~10% of a kernel line's walk
    # Codes are written as int8 while every group has at most 127 distinct values (most
    # stats: a million kernels' names, modules, ops), the rows so far widened to int32 when
    # one has more: the reader keeps them in the narrowest dtype anyway (`narrow_codes`),
    # and an int32 array it narrowed was 4 bytes per event and group through the decode,
    # then a pass to copy (19 MB on a million kernels in 5 groups)
    codes_a = np.empty((ng, total), np.int8)
    cdef int8_t[:, ::1] codes8 = codes_a
    cdef int32_t[:, ::1] codes = _NO_CODES
    cdef bint wide = False
    ec_a = np.empty(max(ng, 1), np.int32)
    cdef int32_t[::1] ec_v = ec_a
    cdef int32_t* ec = &ec_v[0]
    # (a listed group, flag 2: its table may repeat a value, `_Intern(may_list=True)`)
    interns = [_Intern(only_a[g] == 2) for g in range(ng)]
    cdef list ilist = interns
    cdef _Intern tab
    cdef int64_t rkey
    cdef const int64_t[::1] pof = np.ascontiguousarray(plane_of if grouped else _EMPTY,
                                                         np.int64)
    if grouped and pof.shape[0] < total:
        raise ValueError("plane_of shorter than the events")
    # (every row is written; rows never reached are never backed by memory)
    mid_a = np.empty(total, np.int64)
    off_a = np.empty(total, np.int64)
    dur_a = np.empty(total, np.int64)
    agg_a = np.empty(total, np.bool_)
    raw_a = np.empty(total if drop else 1, np.int64)
    cdef int64_t[::1] mid = mid_a, off = off_a, dur = dur_a, raw = raw_a
    cdef uint8_t[::1] agg = agg_a.view(np.uint8)
    # Capacity: a stat record takes at least 2 bytes, so the lines' bytes / 2 bound them all,
    # and an event holds about one record per wanted id (8 when all are kept; more regrow);
    # pages never written are never backed by memory, so a generous capacity costs nothing and
    # saves regrowing.
    cdef Py_ssize_t nbytes = 0
    for i in range(nl):
        nbytes += ends[i] - starts[i]
    # (no stat asked for, `wanted` empty: none is ever recorded, no room made for any; room
    # for a million events' records was 29 MB reserved with the line, some of it resident
    # where the heap reused freed pages)
    cdef _Stats st = _Stats(min(nbytes // 2, total * (8 if all_stats else nwa + 1))
                            if all_stats or nwa else 0)
    cdef Py_ssize_t r, se, vp
    cdef uint64_t f2, v2
    cdef int w2
    cdef uint8_t x
    for i in range(nl):
        p = starts[i]
        e = ends[i]
        while p < e:
            # The line's next XEvent (field 4), its other fields skipped as upb would
            # (`_next_event`). Here and below, a one-byte tag, varint or length (nearly every
            # tag, id and stat length of a capture) is read in place, anything longer by the
            # general readers through temporaries (f2, w2, v2, r): gcc does not inline those
            # readers into this function, and their out-parameters pinned the walk's position
            # and fields to the stack (~35% of the walk's time on a TPU op line).
            x = b[p]
            if 8 <= x < 0x80:  # a one-byte tag, field number > 0
                fn = x >> 3
                wt = x & 7
                p += 1
            else:
                p = _tag(b, p, e, &f2, &w2)
                if p < 0:
                    raise _fail(p)
                fn = f2
                wt = w2
            if not (fn == 4 and wt == 2):
                p = _skip(b, p, e, wt, fn, D_LINE)
                if p < 0:
                    raise _fail(p)
                continue
            x = b[p] if p < e else 0x80
            if x < 0x80 and p + 1 + x <= e:  # a one-byte length
                es = p + 1
                ee = p = es + x
            else:
                es = _len(b, p, e, &r)
                if es < 0:
                    raise _fail(es)
                ee = p = r
            if k >= total:
                raise Corrupt("more events than counted")
            # one XEvent [es, ee)
            m = o = d = 0
            a = 0
            hit = False
            st0 = st.n
            for g in range(ng):
                ec[g] = -1
            if grouped:
                pl = pof[k]
            while es < ee:
                x = b[es]
                if 8 <= x < 0x80:
                    fn = x >> 3
                    wt = x & 7
                    es += 1
                else:
                    es = _tag(b, es, ee, &f2, &w2)
                    if es < 0:
                        raise _fail(es)
                    fn = f2
                    wt = w2
                if wt == 0 and (fn == 1 or fn == 2 or fn == 3 or fn == 5):
                    x = b[es] if es < ee else 0x80
                    if x < 0x80:
                        v = x
                        es += 1
                    else:
                        es = _varint(b, es, ee, &v2)
                        if es < 0:
                            raise _fail(es)
                        v = v2
                    if fn == 1:
                        m = <int64_t>v
                    elif fn == 2:  # the `data` oneof: the last field written wins
                        o = <int64_t>v
                        a = 0
                    elif fn == 3:
                        d = <int64_t>v
                    else:
                        o = 0
                        a = 1
                elif wt == 2 and fn == 4:
                    x = b[es] if es < ee else 0x80
                    if x < 0x80 and es + 1 + x <= ee:
                        q = es + 1
                        es = se = q + x
                    else:
                        q = _len(b, es, ee, &r)
                        if q < 0:
                            raise _fail(q)
                        es = se = r
                    # one XStat [q, se): `_stat`, read in place
                    sid = 0
                    kind = 0
                    ival = 0
                    vpos = 0
                    while q < se:
                        x = b[q]
                        if 8 <= x < 0x80:
                            fn = x >> 3
                            wt = x & 7
                            q += 1
                        else:
                            q = _tag(b, q, se, &f2, &w2)
                            if q < 0:
                                raise _fail(q)
                            fn = f2
                            wt = w2
                        if wt == 0 and (fn == 1 or fn == 3 or fn == 4 or fn == 7):
                            vp = q
                            x = b[q] if q < se else 0x80
                            if x < 0x80:
                                v = x
                                q += 1
                            else:
                                q = _varint(b, q, se, &v2)
                                if q < 0:
                                    raise _fail(q)
                                v = v2
                            if fn == 1:
                                sid = <int64_t>v
                            else:
                                kind = <int8_t>fn
                                ival = v
                                vpos = vp
                        elif wt == 1 and fn == 2:
                            if q + 8 > se:
                                raise _fail(E_PAST)
                            v = 0
                            for vp in range(8):
                                v |= (<uint64_t>b[q + vp]) << (8 * vp)
                            kind = 2
                            ival = v
                            vpos = q
                            q += 8
                        elif wt == 2 and (fn == 5 or fn == 6):
                            vp = _len(b, q, se, &r)
                            if vp < 0:
                                raise _fail(vp)
                            kind = <int8_t>fn
                            ival = <uint64_t>(r - vp)
                            vpos = vp
                            q = r
                        else:
                            q = _skip(b, q, se, wt, fn, D_STAT)
                            if q < 0:
                                raise _fail(q)
                    if kind == 5 and not _utf8_ok(b + vpos, <Py_ssize_t>ival):
                        nbad += 1
                    if grouped:
                        key = pl * stride + sid if 0 <= sid < ids else -1
                    else:
                        key = sid
                    if all_stats or (wdir[key] >= 0 if 0 <= key < nwd else
                                     (not nwd and _in(&wa[0], nwa, key))):
                        st.push(<int32_t>row, key, kind, ival, vpos)
                    if nnk and not hit:
                        hit = (ndir[key] >= 0 if 0 <= key < nnd else
                               (not nnd and _in(&nk[0], nnk, key)))
                    if ngk:
                        if ngd:
                            g = gdir[key] if 0 <= key < ngd else -1
                        else:
                            gi = _find(&gk[0], ngk, key)
                            g = gg[gi] if gi >= 0 else -1
                        if g >= 0:
                            if ec[g] < 0 and only[g] == 1:
                                ec[g] = 0
                            elif ec[g] < 0:  # the event's first stat of the group
                                if kind == 7 and grouped:  # a ref names its own plane's id
                                    rkey = <int64_t>ival
                                    ival = <uint64_t>(pl * stride + rkey
                                                      if 0 <= rkey < ids else -1)
                                tab = <_Intern>ilist[g]
                                ec[g] = tab.code(b, kind, ival, vpos)
                                if ec[g] > 127 and not wide:
                                    codes_a = _widened(codes_a, row)
                                    codes = codes_a
                                    wide = True
                else:
                    es = _skip(b, es, ee, wt, fn, D_EVENT)
                    if es < 0:
                        raise _fail(es)
            if (nsk and (sdir[m] >= 0 if 0 <= m < nsd else
                         (not nsd and _in(&sk[0], nsk, m)))) or (
                    nck and not hit and (cdir[m] >= 0 if 0 <= m < ncd else
                                         (not ncd and _in(&ck[0], nck, m)))):
                st.n = st0  # stats of these events never matter
                if drop:  # nor does the event: no row, its impossible times counted
                    if k == row:  # the first event dropped: the rows before are events 0..
                        for q in range(row):
                            raw[q] = q
                    if not a:
                        if o < 0 or d < 0:
                            neg += 1
                        elif o >= time_limit or d >= time_limit:
                            big += 1
                    k += 1
                    continue
                for g in range(ng):
                    ec[g] = -1
            mid[row] = m
            off[row] = o
            dur[row] = d
            agg[row] = a
            if wide:
                for g in range(ng):
                    codes[g, row] = ec[g]
            else:
                for g in range(ng):
                    codes8[g, row] = <int8_t>ec[g]
            if drop and k != row:  # (until an event is dropped, `raw` is not touched: a
                raw[row] = k       # line of a million events none of which is dropped)
            if timed and (a or o < 0 or d < 0 or o >= time_limit or d >= time_limit):
                odd += 1
            row += 1
            k += 1
    if k != total:
        raise Corrupt("fewer events than counted")
    raw_rows = None
    if row < total:  # (only where events were dropped)
        mid_a, off_a, dur_a, agg_a = mid_a[:row], off_a[:row], dur_a[:row], agg_a[:row]
        codes_a = np.ascontiguousarray(codes_a[:, :row])
        raw_rows = raw_a[:row]
    return (mid_a, off_a, dur_a, agg_a, st.arrays(),
            (codes_a, [t.arrays() for t in interns]), nbad,
            (raw_rows, neg, big, odd) if timed else None)


def event_cuts(data, Py_ssize_t s, Py_ssize_t e, Py_ssize_t every):
    """Where to cut one line's payload [s, e) into pieces of `every` events each (the last
    holds the rest, and whatever fields follow the last event), each piece whole fields in
    order: (int64 bounds, pieces + 1 of them, from s to e; int64 events per piece). None
    where the walk meets bytes `decode_events` would refuse, or `every` < 1: the line is
    then decoded whole, and refused as before. The walk is `decode_events`' own
    (`_next_event`): the pieces number the events as one decode of the line does.
    Why: a line of a million events no rule reads (overlap.trace.gpu's `_PIECE`) was decoded
    whole, 24 bytes an event held through its classification, for counts."""
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* b = &mv[0]
    cdef Py_ssize_t p = s, es, ee, k = 0
    if every < 1 or s < 0 or e > mv.shape[0] or s > e:
        return None
    cuts = [s]
    counts = []
    while p < e:
        p = _next_event(b, p, e, &es, &ee)
        if p < 0:
            return None
        if es < 0:
            break  # the line holds no more events
        k += 1
        if k == every:
            cuts.append(p)
            counts.append(k)
            k = 0
    if k or not counts:
        cuts.append(e)
        counts.append(k)
    else:
        cuts[len(cuts) - 1] = e  # (fields after the last event go with the last piece)
    return np.array(cuts, np.int64), np.array(counts, np.int64)


def compact(int64_t[::1] a, const uint8_t[::1] keep):
    """Move the elements of `a` where `keep` is nonzero to its front, in order, in place;
    returns how many: `a[keep]` without a new array (overlap.trace.tpu's compute columns,
    the line's own starts and durations: two 7 MB arrays less on a TPU 1M read's peak)."""
    cdef Py_ssize_t n = a.shape[0], i, j = 0
    if keep.shape[0] != n:
        raise ValueError("keep and a differ in length")
    for i in range(n):
        if keep[i]:
            a[j] = a[i]
            j += 1
    return j


cdef class _AtSink:
    """What `_walk_at` does with the stats of each event it stops at (one walk, two uses)."""
    cdef int begin(self) except -1:
        return 0

    cdef int stat(self, Py_ssize_t j, Py_ssize_t k, int64_t sid, int8_t kind, uint64_t ival,
                  int64_t vpos) except -1:
        return 0


cdef int _walk_at(data, const int64_t[::1] starts, const int64_t[::1] ends,
                  const int64_t[::1] at, _AtSink sink) except -1:
    """Walk the events of the lines [starts[i], ends[i]) in order (numbered as `decode_events`
    numbers them) to the last index in `at` (sorted, distinct): each event asked for has its
    stats handed to `sink` in the order written (`sink.stat(j, k, ...)`: `j` its place in `at`,
    `k` its index), after `sink.begin()`. Every other event is stepped over by its length
    prefix. The lines must have been read by `decode_events` first (which refuses what upb
    refuses): bytes are checked here only as far as stepping needs."""
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* b = &mv[0]
    cdef Py_ssize_t nl = starts.shape[0], na = at.shape[0]
    cdef Py_ssize_t i, p, e, es, ee, q, k = 0, j = 0
    cdef uint64_t fn
    cdef int wt, rc
    cdef int64_t sid, vpos
    cdef int8_t kind
    cdef uint64_t ival
    for i in range(nl):
        if j >= na:
            break
        p = starts[i]
        e = ends[i]
        while p < e and j < na:
            p = _next_event(b, p, e, &es, &ee)
            if p < 0:
                raise _fail(p)
            if es < 0:
                break  # the line holds no more events
            if k == at[j]:
                # one XEvent [es, ee): its stats, as decode_events reads them
                sink.begin()
                while es < ee:
                    es = _tag(b, es, ee, &fn, &wt)
                    if es < 0:
                        raise _fail(es)
                    if wt == 2 and fn == 4:
                        q = _len(b, es, ee, &es)
                        if q < 0:
                            raise _fail(q)
                        rc = _stat(b, q, es, &sid, &kind, &ival, &vpos)
                        if rc < 0:
                            raise _fail(rc)
                        sink.stat(j, k, sid, kind, ival, vpos)
                    else:
                        es = _skip(b, es, ee, wt, fn, D_EVENT)
                        if es < 0:
                            raise _fail(es)
                j += 1
            k += 1
    if j < na:
        raise ValueError("event index beyond the lines' events")
    return 0


cdef class _RecordsAt(_AtSink):
    """`decode_events_at`'s sink: a record per stat whose id is wanted."""
    cdef _Stats st
    cdef const int64_t[::1] wanted

    def __cinit__(self, _Stats st, const int64_t[::1] wanted):
        self.st = st
        self.wanted = wanted

    cdef int stat(self, Py_ssize_t j, Py_ssize_t k, int64_t sid, int8_t kind, uint64_t ival,
                  int64_t vpos) except -1:
        if self.wanted.shape[0] and _in(&self.wanted[0], self.wanted.shape[0], sid):
            self.st.push(<int32_t>k, sid, kind, ival, vpos)
        return 0


def decode_events_at(data, const int64_t[::1] starts, const int64_t[::1] ends,
                     const int64_t[::1] at, const int64_t[::1] wanted):
    """The stat records of a few events: those whose index among the events of the lines
    [starts[i], ends[i]) (counted in order, as `decode_events` numbers them) is in `at`
    (sorted, distinct), for stat ids in `wanted` (sorted): a dict of `ev` (that index), sid,
    kind, ival, vpos, each event's in the order written, as `decode_events` keeps them.
    Every other event is stepped over by its length prefix, and the walk ends at the last
    event asked for (`_walk_at`). Why: the TPU device clock of copy boundaries is two stats of
    a few thousand events of a line of a million; `decode_events` with `skip` decoded every
    event's fields again to keep none (~0.05 s per 1M events)."""
    cdef _Stats st = _Stats(at.shape[0] * (wanted.shape[0] + 1) + 16)
    _walk_at(data, starts, ends, at, _RecordsAt(st, wanted))
    return st.arrays()


cdef class _FirstIntsAt(_AtSink):
    """`ints_at`'s sink: per set of stat ids, each event's first stat of the set."""
    cdef const int64_t[::1] sids
    cdef const int64_t[::1] set_of
    cdef int64_t[:, ::1] val
    cdef uint8_t[:, ::1] has
    cdef uint64_t seen  # the sets whose first stat the current event has shown

    def __cinit__(self, const int64_t[::1] sids, const int64_t[::1] set_of, val, has):
        self.sids = sids
        self.set_of = set_of
        self.val = val
        self.has = has
        self.seen = 0

    cdef int begin(self) except -1:
        self.seen = 0
        return 0

    cdef int stat(self, Py_ssize_t j, Py_ssize_t k, int64_t sid, int8_t kind, uint64_t ival,
                  int64_t vpos) except -1:
        cdef Py_ssize_t t, s
        for t in range(self.sids.shape[0]):
            if self.sids[t] != sid:
                continue
            s = self.set_of[t]
            if self.seen & ((<uint64_t>1) << s):
                continue
            self.seen |= (<uint64_t>1) << s
            if kind == 4 or (kind == 3 and ival <= <uint64_t>0x7fffffffffffffff):
                self.val[s, j] = <int64_t>ival
                self.has[s, j] = 1
        return 0


def ints_at(data, const int64_t[::1] starts, const int64_t[::1] ends,
            const int64_t[::1] at, const int64_t[::1] sids, const int64_t[::1] set_of,
            Py_ssize_t nsets):
    """`LineEvents.ints_of(at_only=True)` in one walk (`_walk_at`, as `decode_events_at`): per
    set `s` of stat ids (the ids `sids[t]` with `set_of[t] == s`) and per event `at[j]`, that
    event's first stat (in the order written) with an id of the set: its value where it is an
    int64, or a uint64 below 2**63; else nothing (a later stat of the set is not looked at).
    Returns (values int64[nsets, len(at)], has uint8[nsets, len(at)]): no record per stat, no
    numpy pass per set (the clocked many-ops file's 72k boundary events: ~11 ms -> ~4). At
    most 64 sets."""
    cdef Py_ssize_t t
    if nsets > 64:
        raise ValueError("at most 64 sets")
    if set_of.shape[0] != sids.shape[0]:
        raise ValueError("sids and set_of differ in length")
    for t in range(sids.shape[0]):
        if set_of[t] < 0 or set_of[t] >= nsets:
            raise ValueError("set index out of range")
    val_a = np.zeros((nsets, at.shape[0]), np.int64)
    has_a = np.zeros((nsets, at.shape[0]), np.uint8)
    _walk_at(data, starts, ends, at, _FirstIntsAt(sids, set_of, val_a, has_a))
    return val_a, has_a


cdef int _meta_value(const uint8_t* b, Py_ssize_t p, Py_ssize_t e, int64_t* spans,
                     _Stats st, int32_t i, const int64_t* sids, Py_ssize_t nw,
                     bint checked=False, int64_t* tails=NULL) except -1:
    """Walk one XEventMetadata message [p, e) (entry `i`): where `spans` is given, the name's
    and display name's spans go there (name start, end, display start, end; of a string
    written twice the last); every stat is checked, and pushed to `st` (where given) when
    `nw` < 0 or its id is one of `sids[:nw]`. 0, or 1 where the bytes are malformed.
    `checked` (no `st`): the stats were checked already by this same `_stat`
    (`_entry_decode`), so they are stepped over by their lengths, not decoded again.
    `tails` (with `st`, no `spans`; 4 * `_TAILS` + 1 values: per slot a tail's start,
    length, first record in `st` and record count, then the next slot to replace): the
    last tails met (the bytes from the value's first stat field's tag to its end, as
    `_value_check` keeps them) and the records they gave; a tail byte for byte one of them
    gives the same records, each at the same place in it (`vpos` moved by as much as the
    tail), with no walk. Why: `decode_meta_stats`' 36k copy ops of the many-ops capture
    repeat 4 tails, and walking each stat cost ~200 instructions."""
    cdef uint64_t fn, ival
    cdef int wt
    cdef Py_ssize_t q, vp, j, tp, t0 = -1, r0 = 0, k, r
    cdef int64_t sid, vpos, dv
    cdef int8_t kind
    cdef bint hit
    while p < e:
        tp = p
        p = _tag(b, p, e, &fn, &wt)
        if p < 0:
            return 1
        if wt == 2 and (fn == 2 or fn == 4 or fn == 5):
            vp = _len(b, p, e, &q)
            if vp < 0:
                return 1
            if fn == 5:
                if checked:
                    p = q
                    continue
                if tails != NULL and t0 < 0:  # the tail begins: met before?
                    t0 = tp
                    r0 = st.n
                    k = _tail_slot(b, t0, e - t0, tails, 4)
                    if k >= 0:
                        dv = t0 - tails[4 * k]
                        r = tails[4 * k + 2]
                        for r in range(r, r + tails[4 * k + 3]):
                            st.push(i, st.p_sid[r], st.p_kind[r], st.p_ival[r],
                                    st.p_vpos[r] + dv)
                        return 0
                if _stat(b, vp, q, &sid, &kind, &ival, &vpos) < 0:
                    return 1
                if st is not None:
                    hit = nw < 0
                    for j in range(nw if nw > 0 else 0):  # a rule asks for 1-4 ids
                        if sids[j] == sid:
                            hit = True
                            break
                    if hit:
                        st.push(i, sid, kind, ival, vpos)
            elif spans != NULL:
                j = 0 if fn == 2 else 2
                spans[j] = vp
                spans[j + 1] = q
            p = q
        else:
            p = _skip(b, p, e, wt, fn, D_EVENT)
            if p < 0:
                return 1
    if t0 >= 0:  # a new tail: kept, with its records
        k = tails[4 * _TAILS]
        tails[4 * k], tails[4 * k + 1] = t0, e - t0
        tails[4 * k + 2], tails[4 * k + 3] = r0, st.n - r0
        tails[4 * _TAILS] = (k + 1) % _TAILS
    return 0


cdef int _meta_entry(const uint8_t* b, Py_ssize_t p, Py_ssize_t e, int64_t* o7,
                     bint checked) except -1:
    """One event_metadata map entry [p, e) as `decode_meta` reads it, into `o7`: key, the
    value message's start and end, the name's, the display name's (0, 0 where absent).
    0, or 1 where upb would read it otherwise (`_map_entry`'s, or a value upb refuses)."""
    cdef Py_ssize_t vs, ve
    cdef int64_t sp[4]
    if _map_entry(b, p, e, o7, &vs, &ve):
        return 1
    # the XEventMetadata value [vs, ve)
    sp[0] = sp[1] = sp[2] = sp[3] = 0
    if _meta_value(b, vs, ve, sp, None, 0, NULL, -1, checked):
        return 1
    o7[1], o7[2], o7[3], o7[4], o7[5], o7[6] = vs, ve, sp[0], sp[1], sp[2], sp[3]
    return 0


cdef inline int _meta_store(Py_ssize_t i, const int64_t* o7, bint narrow, _Keys key,
                            int64_t[:, ::1] name, int64_t[:, ::1] disp, int64_t[:, ::1] value,
                            int32_t[:, ::1] name32, int32_t[:, ::1] disp32,
                            int32_t[:, ::1] value32) except -1:
    """Entry `i`'s columns (`_meta_entry`'s `o7`) into `decode_meta`'s arrays (zeroed); 1
    where it wrote a display name's span, else 0. An absent one is (0, 0), as the zeroed
    array holds: not written, so that a million entries without one leave the column's pages
    untouched (never backed by memory: 8 MB of a GPU plane of a million entries)."""
    key.put(i, o7[0])
    cdef bint shown = o7[5] != 0 or o7[6] != 0
    if narrow:
        value32[0, i], value32[1, i] = <int32_t>o7[1], <int32_t>o7[2]
        name32[0, i], name32[1, i] = <int32_t>o7[3], <int32_t>o7[4]
        if shown:
            disp32[0, i], disp32[1, i] = <int32_t>o7[5], <int32_t>o7[6]
    else:
        value[0, i], value[1, i] = o7[1], o7[2]
        name[0, i], name[1, i] = o7[3], o7[4]
        if shown:
            disp[0, i], disp[1, i] = o7[5], o7[6]
    return shown


cdef bint _meta_reverse(bint ok, bint narrow, Py_ssize_t n, _Keys key,
                        int32_t[:, ::1] name32, int32_t[:, ::1] disp32,
                        int32_t[:, ::1] value32, bint shown=True) noexcept:
    """`decode_meta`'s `reversed`: where narrow and the keys strictly descend, every column
    reversed in place (the keys then ascend; the display names' only where one was written,
    `shown`: zeros reversed are zeros)."""
    cdef Py_ssize_t i, c
    cdef bint rev = ok and narrow and n > 1
    if rev:
        for i in range(n - 1):
            if key.at(i + 1) >= key.at(i):
                rev = False
                break
    if rev:
        key.reverse()
        for c in range(2):
            _reverse32(&name32[c, 0], n)
            if shown:
                _reverse32(&disp32[c, 0], n)
            _reverse32(&value32[c, 0], n)
    return rev


def _meta_arrays(Py_ssize_t n, bint narrow):
    """`decode_meta`'s zeroed span columns for `n` entries: name, disp, value (the keys:
    `_Keys`)."""
    dt = np.int32 if narrow else np.int64
    return np.zeros((2, n), dt), np.zeros((2, n), dt), np.zeros((2, n), dt)


@cython.final
cdef class _Keys:
    """`decode_meta`'s keys, zeroed, written in place: as int32 while each one fits, where
    the entries are at least `NARROW_KEYS_MIN` and `narrow` (widened to int64 at the first
    that does not), else int64; handed to numpy without a copy (`taken`). Why: a plane of a
    million entries kept 8 MB of int64 keys on the read's peak (and narrowing them after
    was 4 MB more, for a moment, at that peak). Real planes hold a few thousand entries:
    int64, as before."""
    cdef int32_t* v32
    cdef int64_t* v64
    cdef Py_ssize_t n

    def __cinit__(self, Py_ssize_t n, bint narrow):
        self.n = n
        if narrow and n >= NARROW_KEYS_MIN:
            self.v32 = <int32_t*>calloc(max(n, 1), sizeof(int32_t))
            if self.v32 == NULL:
                raise MemoryError()
        else:
            self.v64 = <int64_t*>calloc(max(n, 1), sizeof(int64_t))
            if self.v64 == NULL:
                raise MemoryError()

    def __dealloc__(self):
        free(self.v32)
        free(self.v64)

    cdef inline int put(self, Py_ssize_t i, int64_t k) except -1:
        if self.v32 != NULL:
            if -2147483648 <= k <= 2147483647:
                self.v32[i] = <int32_t>k
                return 0
            self._widen()
        self.v64[i] = k
        return 0

    cdef int _widen(self) except -1:
        cdef Py_ssize_t j
        self.v64 = <int64_t*>calloc(max(self.n, 1), sizeof(int64_t))
        if self.v64 == NULL:
            raise MemoryError()
        for j in range(self.n):
            self.v64[j] = self.v32[j]
        free(self.v32)
        self.v32 = NULL
        return 0

    cdef inline int64_t at(self, Py_ssize_t i) noexcept nogil:
        return self.v32[i] if self.v32 != NULL else self.v64[i]

    cdef void reverse(self) noexcept:
        if self.v32 != NULL:
            _reverse32(self.v32, self.n)
        else:
            _reverse64(self.v64, self.n)

    cdef object taken(self):
        if self.v32 != NULL:
            return _owned_int32(<void**>&self.v32, self.n)
        return _owned(<void**>&self.v64, self.n, sizeof(int64_t), _I64_FORMAT, np.int64)


NARROW_KEYS_MIN = 1 << 16


def decode_meta(data, const int64_t[::1] starts, const int64_t[::1] ends, bint narrow=False,
                bint checked=False):
    """event_metadata map entries (payloads [starts[i], ends[i])) -> dict with `ok`, per entry
    `key`, `name`, `disp` and `value` spans ([2, n] start/end, empty where absent; `value`:
    the XEventMetadata message). Every stat is checked, none kept: `decode_meta_stats`
    decodes those of the entries a rule asks about.
    `ok` is False (and nothing else trustworthy) where upb reads the entries differently than
    these columns say: a field other than the key and the value, a value written twice, or
    bytes upb refuses.
    `narrow` (the caller's buffer is under 2 GiB): the spans as int32, and where the keys
    strictly descend (upb writes a map newest first) every column reversed in place, so the
    keys ascend (`reversed` True). Why: the table keeps exactly these; int64 columns then a
    reversed copy and a narrowing pass were 3 x 2 fresh arrays of each entry's spans (page
    faults: ~5 ms on the many-ops capture's 108k entries).
    `checked`: every entry was checked by `split_space` (`_entry_decode`: each stat by the
    same `_stat`, an error raised there), so stats are stepped over by their lengths. Only
    for entries so checked: on others a malformed stat would go unseen here. (`split_space`
    gives a stripped plane's entries decoded already, so the reader asks for this only
    where a `MetaTable` of such a plane is built again without them; the tests hold it
    equal to the full decode and to `split_space`'s.)"""
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* b = &mv[0]
    cdef Py_ssize_t n = starts.shape[0], i
    name_a, disp_a, value_a = _meta_arrays(n, narrow)
    cdef _Keys key = _Keys(n, narrow)
    cdef int64_t[:, ::1] name, disp, value
    cdef int32_t[:, ::1] name32, disp32, value32
    if narrow:
        name32, disp32, value32 = name_a, disp_a, value_a
    else:
        name, disp, value = name_a, disp_a, value_a
    cdef int64_t o7[7]
    cdef bint ok = True
    cdef bint shown = False
    for i in range(n):
        if _meta_entry(b, starts[i], ends[i], o7, checked):
            ok = False
            break
        if _meta_store(i, o7, narrow, key, name, disp, value, name32, disp32, value32) == 1:
            shown = True
    cdef bint rev = _meta_reverse(ok, narrow, n, key, name32, disp32, value32, shown)
    return {"ok": ok, "key": key.taken(), "name": name_a, "disp": disp_a,
            "value": value_a,
            "reversed": rev}


cdef inline void _reverse64(int64_t* a, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i = 0, j = n - 1
    cdef int64_t t
    while i < j:
        t = a[i]
        a[i] = a[j]
        a[j] = t
        i += 1
        j -= 1


cdef inline void _reverse32(int32_t* a, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i = 0, j = n - 1
    cdef int32_t t
    while i < j:
        t = a[i]
        a[i] = a[j]
        a[j] = t
        i += 1
        j -= 1


def decode_meta_stats(data, const int64_t[::1] vs, const int64_t[::1] ve,
                      const int64_t[::1] sids):
    """The stat records of XEventMetadata messages [vs[i], ve[i]) that `decode_meta` checked
    (its `value` spans) whose stat id is one of `sids`: `ev` (i), sid, kind, ival, vpos, each
    message's in the order written.
    Why apart: a table keeps only its entries' spans; the few entries a rule asks about are
    decoded when asked, and only the stats it asks for (the many-ops capture's 108k entries
    hold 540k records, 11-16 MiB kept for the ~36k entries whose 1-3 stats the rules read)."""
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* b = &mv[0] if mv.shape[0] else NULL
    cdef Py_ssize_t n = vs.shape[0], i, nb = mv.shape[0], total = 0
    cdef Py_ssize_t nw = sids.shape[0]
    cdef const int64_t* w = &sids[0] if nw else NULL
    if ve.shape[0] != n:
        raise ValueError("value starts and ends differ in length")
    for i in range(n):
        if vs[i] < 0 or ve[i] < vs[i] or ve[i] > nb:
            raise ValueError("value span outside the buffer")
        total += ve[i] - vs[i]
    cdef _Stats st = _Stats(min(total // 2, n * (nw + 1)) + 16)
    cdef Py_ssize_t p
    cdef int64_t tails[4 * _TAILS + 1]  # (`_meta_value`: none yet)
    for p in range(4 * _TAILS + 1):
        tails[p] = -1 if p % 4 == 1 else 0
    for i in range(n):
        if i + _AHEAD < n:  # the entry read `_AHEAD` later, a line at a time (see _AHEAD)
            p = vs[i + _AHEAD]
            while p < ve[i + _AHEAD]:
                __builtin_prefetch(b + p)
                p += 64
        if _meta_value(b, vs[i], ve[i], NULL, st, <int32_t>i, w, nw, False, tails):
            raise ValueError("damaged event metadata")
    return st.arrays()


def plane_stats(data, const int64_t[::1] spans, names):
    """A plane's stats as `wire.Plane.stats` reads them from upb's messages: {name: value},
    the first stat of a name winning, a stat whose id `names` (id -> name, `.get`) does not
    name left out (ids signed, refs unsigned, as the schema has them), a ref read as the
    name it refers to ("" where none), no value as None; from its XStat fields
    [spans[2i], spans[2i + 1]) of `data` (tag and length included, in the order written).
    None where a field is not one upb reads plainly (`_plain_stat`: the caller asks upb).
    Why: 10k GPU planes of eight device facts each took ~6 us a plane through upb's
    messages (63 ms); here ~2 (22 ms)."""
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* b = &mv[0] if mv.shape[0] else NULL
    cdef Py_ssize_t i, n = spans.shape[0] // 2, p, e, q, vp, nb = mv.shape[0]
    cdef uint64_t fn, bits
    cdef int wt
    cdef int64_t sid, vpos
    cdef int8_t kind
    cdef uint64_t ival
    cdef double d
    cdef dict out = {}
    get = names.get
    for i in range(n):
        p, e = spans[2 * i], spans[2 * i + 1]
        if p < 0 or e < p or e > nb:
            raise ValueError("stat span outside the buffer")
        p = _tag(b, p, e, &fn, &wt)
        if p < 0 or fn != 6 or wt != 2:
            return None
        vp = _len(b, p, e, &q)
        if vp < 0 or q != e or not _plain_stat(b, vp, q):
            return None
        if _stat(b, vp, q, &sid, &kind, &ival, &vpos) < 0:
            return None
        # (the id is an int64 field, a ref a uint64 one: each as upb gives it)
        name = get(sid)
        if name is None or name in out:
            continue
        if kind == 0:
            value = None
        elif kind == 2:
            bits = ival
            memcpy(&d, &bits, 8)
            value = d
        elif kind == 3:
            value = PyLong_FromUnsignedLongLong(ival)
        elif kind == 4:
            value = <int64_t>ival
        elif kind == 5:
            value = PyUnicode_DecodeUTF8(<char*>(b + vpos), <Py_ssize_t>ival, NULL)
        elif kind == 6:
            value = PyBytes_FromStringAndSize(<char*>(b + vpos), <Py_ssize_t>ival)
        else:  # (7: a ref)
            value = get(PyLong_FromUnsignedLongLong(ival), "")
        out[name] = value
    return out


def gather_spans(const uint8_t[::1] buf, const int64_t[::1] fs, const int64_t[::1] fe,
                 int sep=-1):
    """The bytes of the spans [fs[i], fe[i]) of `buf`, concatenated (with the byte `sep`
    after each span where sep >= 0), as a new uint8 array (`MetaTable.gather_spans`).
    Why here: numpy does it with an index array of 8 bytes per output byte (names) or a
    memoryview slice object per span (HLO texts); this is one memcpy per span. Spans must
    lie within `buf` and be non-negative in length (the caller's spans of one table)."""
    cdef Py_ssize_t n = fs.shape[0], i, total = 0, ln, o = 0
    cdef Py_ssize_t nb = buf.shape[0]
    for i in range(n):
        ln = fe[i] - fs[i]
        if ln < 0 or fs[i] < 0 or fe[i] > nb:
            raise ValueError("span outside the buffer")
        total += ln + (1 if sep >= 0 else 0)
    out_a = np.empty(total, np.uint8)
    if total == 0:
        return out_a
    cdef uint8_t[::1] out = out_a
    cdef uint8_t* po = &out[0]
    cdef const uint8_t* pb = &buf[0] if nb else NULL
    cdef uint8_t s = <uint8_t>(sep if sep >= 0 else 0)
    with nogil:
        for i in range(n):
            if i + _AHEAD < n:
                __builtin_prefetch(pb + fs[i + _AHEAD])
            ln = fe[i] - fs[i]
            if ln:
                memcpy(po + o, pb + fs[i], ln)
                o += ln
            if sep >= 0:
                po[o] = s
                o += 1
    return out_a


cdef enum:
    _DIGITS_MAX = 24  # trailing digits `boundary_names` decides on (hlotext._DIGITS_MAX)

cdef uint8_t _TEXT_BYTE[256]  # bytes `text_facts` stops at: NUL, non-ASCII, `=`, `-`, `S`
for _i in range(256):
    _TEXT_BYTE[_i] = _i == 0 or _i >= 0x80 or _i in (0x3D, 0x2D, 0x53)


cdef inline uint64_t _stop_bytes(uint64_t w) noexcept nogil:
    """The bytes of w (8 text bytes, little-endian) that stop `text_facts`' walk
    (`_TEXT_BYTE`: NUL, >= 0x80, `=`, `-`, `S`), each as its high bit (0x80 << 8 * i for
    byte i). Exact per byte: ((w & 0x7f..) ^ X) + 0x7f.. leaves a byte's high bit clear iff
    its low 7 bits equal X's, with no carry into the next byte (at most 0x7f + 0x7f)."""
    cdef uint64_t y = w & 0x7F7F7F7F7F7F7F7FULL, k = 0x7F7F7F7F7F7F7F7FULL
    cdef uint64_t a = ((y + k) & ((y ^ 0x3D3D3D3D3D3D3D3DULL) + k)
                       & ((y ^ 0x2D2D2D2D2D2D2D2DULL) + k) & ((y ^ 0x5353535353535353ULL) + k))
    return (~a | w) & 0x8080808080808080ULL


cdef enum:  # `_text_byte`'s flags
    _T_MIXED = 1  # a NUL or a byte >= 0x80 (not plain)
    _T_CS = 2
    _T_SL = 4
    _T_S5 = 8


cdef inline void _text_byte(const uint8_t* b, Py_ssize_t k, Py_ssize_t lo, Py_ssize_t hi,
                            int64_t* e, int64_t* q, int* fl) noexcept nogil:
    """`text_facts`' rule at the stop byte b[k] of the text [lo, hi), the bytes before it
    met already: the first ` = ` (*e), the first ` copy-start(` after it (*q), flags."""
    cdef uint8_t c = b[k]
    if c == 0 or c >= 0x80:
        fl[0] |= _T_MIXED
    elif c == 0x3D:  # `=` of ` = `
        if e[0] < 0 and k > lo and k + 1 < hi and b[k - 1] == 0x20 and b[k + 1] == 0x20:
            e[0] = k - 1
    elif c == 0x2D:  # `-` of `copy-start`, `slice-start(`, ` copy-start(`
        if not (fl[0] & _T_CS) and k - 4 >= lo and k + 6 <= hi \
                and memcmp(b + k - 4, b"copy-start", 10) == 0:
            fl[0] |= _T_CS
        if k - 5 >= lo and k + 7 <= hi:
            if not (fl[0] & _T_SL) and memcmp(b + k - 5, b"slice-start(", 12) == 0:
                fl[0] |= _T_SL
            # (an ` = ` before it is already met: it begins 5+ bytes earlier)
            if q[0] < 0 and e[0] >= 0 and k - 5 >= e[0] \
                    and memcmp(b + k - 5, b" copy-start(", 12) == 0:
                q[0] = k - 5
    elif not (fl[0] & _T_S5) and k + 4 <= hi and memcmp(b + k, b"S(5)", 4) == 0:  # `S`
        fl[0] |= _T_S5


def text_facts(const uint8_t[::1] buf, const int64_t[::1] fs, const int64_t[::1] fe):
    """Per text [fs[i], fe[i]) of `buf` (HLO texts in a `MetaTable`'s buffer): (plain: only
    bytes 0x01-0x7f; eq: where its first ` = ` begins; has `copy-start`; has
    `slice-start(`; call: where the first ` copy-start(` at or after `eq` begins (-1 without
    an `eq`); has `S(5)`), positions in `buf`, -1 where none. Each pattern counts only where
    it lies wholly inside the text. Why: the same facts by numpy (`tpu._text_facts_numpy`)
    gather every text into one buffer and make a pass per pattern over it, with an index per
    candidate byte; here one walk per text, which stops only at the bytes the patterns are
    anchored on (each pattern has one: `=` of ` = `, `-` of the three others, the `S` of
    `S(5)`), ~4x faster than a search per pattern on 140-byte texts."""
    cdef Py_ssize_t n = fs.shape[0], i, p, lo, hi, nb = buf.shape[0]
    _spans_within(fs, fe, nb, "text")
    plain_a = np.ones(n, np.bool_)
    eq_a = np.full(n, -1, np.int64)
    cs_a = np.zeros(n, np.bool_)
    sl_a = np.zeros(n, np.bool_)
    call_a = np.full(n, -1, np.int64)
    s5_a = np.zeros(n, np.bool_)
    if n == 0 or nb == 0:
        return plain_a, eq_a, cs_a, sl_a, call_a, s5_a
    cdef uint8_t[::1] plain = plain_a.view(np.uint8), cs = cs_a.view(np.uint8)
    cdef uint8_t[::1] sl = sl_a.view(np.uint8), s5 = s5_a.view(np.uint8)
    cdef int64_t[::1] eq = eq_a, call = call_a
    cdef const uint8_t* b = &buf[0]
    cdef int64_t e, q
    cdef Py_ssize_t k
    cdef uint64_t w, m
    cdef int fl
    with nogil:
        for i in range(n):
            if i + _AHEAD < n:  # (a text spans a few lines: each)
                p = fs[i + _AHEAD]
                while p < fe[i + _AHEAD]:
                    __builtin_prefetch(b + p)
                    p += 64
            lo = fs[i]
            hi = fe[i]
            e = -1
            q = -1
            fl = 0
            # 8 bytes at a time, the rule run at each stop byte in order (`_stop_bytes`,
            # lowest first); the last 0-7 bytes one at a time. Why: a text's bytes are
            # mostly letters, digits and brackets, and a table look-up and a branch per
            # byte cost ~4 instructions a byte (the many-ops capture's 108k texts: 54M)
            p = lo
            while _LITTLE and p + 8 <= hi:
                memcpy(&w, b + p, 8)
                m = _stop_bytes(w)
                while m:
                    _text_byte(b, p + (__builtin_ctzll(m) >> 3), lo, hi, &e, &q, &fl)
                    m &= m - 1
                p += 8
            for k in range(p, hi):
                if _TEXT_BYTE[b[k]]:
                    _text_byte(b, k, lo, hi, &e, &q, &fl)
            eq[i] = e
            call[i] = q
            if fl & _T_MIXED:
                plain[i] = 0
            cs[i] = (fl & _T_CS) != 0
            sl[i] = (fl & _T_SL) != 0
            s5[i] = (fl & _T_S5) != 0
    return plain_a, eq_a, cs_a, sl_a, call_a, s5_a


def str_codes(list keys, bint sort):
    """`arrays.factorize(keys, sort)` where every key is a `str` (exactly: no subclass),
    else None: (codes int64, the distinct keys as a list, each's first object), codes in
    order of first appearance, or with `sort` in the keys' order. Keys are equal as a dict
    finds them (same object, or equal hash and `==`), by an open-addressing table of key
    numbers: no Python int or dict entry per key (`arrays._factorize_objects` makes both,
    8-10 ms on 36k distinct op names, each grouping of a many-ops capture). The table grows
    with the distinct keys (kept at most half full), not sized for every key to be distinct:
    320k copies of 16 ops took an 8 MiB table and a hash per row, the transient that set a
    long capture's peak memory."""
    cdef Py_ssize_t n = len(keys), i, j, c, m = 0, cap = 16
    cdef Py_ssize_t mask = cap - 1
    codes_a = np.empty(n, np.int64)
    slot_a = np.full(cap, -1, np.int64)
    hash_a = np.empty(cap // 2, np.int64)  # per distinct key its hash (at most cap / 2)
    cdef int64_t[::1] codes = codes_a, slot = slot_a, hs = hash_a, rank
    cdef list uniq = [], ranked
    cdef object k
    cdef Py_hash_t h
    for i in range(n):
        k = keys[i]
        if type(k) is not str:
            return None
        h = hash(k)
        j = <Py_ssize_t>(<uint64_t>h & <uint64_t>mask)
        while True:
            c = slot[j]
            if c < 0:  # a new key
                c = m
                slot[j] = c
                hs[c] = h
                uniq.append(k)
                m += 1
                if 2 * m >= cap:  # half full: twice the slots, every key placed again
                    cap *= 2
                    mask = cap - 1
                    slot_a = np.full(cap, -1, np.int64)
                    slot = slot_a
                    grown = np.empty(cap // 2, np.int64)
                    grown[:m] = hash_a[:m]
                    hash_a = grown
                    hs = hash_a
                    for c in range(m):
                        j = <Py_ssize_t>(<uint64_t>hs[c] & <uint64_t>mask)
                        while slot[j] >= 0:
                            j = (j + 1) & mask
                        slot[j] = c
                    c = m - 1
                break
            if hs[c] == h and (uniq[c] is k or uniq[c] == k):
                break
            j = (j + 1) & mask
        codes[i] = c
    if sort and m > 1:
        ranked = sorted(uniq)  # distinct strs: one order, as `list.sort` gives it
        rank_a = np.empty(m, np.int64)
        rank = rank_a
        # each ranked key's code: the table again (every key is in it)
        for i in range(m):
            k = ranked[i]
            h = hash(k)
            j = <Py_ssize_t>(<uint64_t>h & <uint64_t>mask)
            while True:
                c = slot[j]
                if hs[c] == h and (uniq[c] is k or uniq[c] == k):
                    break
                j = (j + 1) & mask
            rank[c] = i
        codes_a = rank_a[codes_a]
        uniq = ranked
    return codes_a, uniq


def join_first(const int64_t[::1] codes, const int64_t[::1] times,
               const int64_t[::1] q_codes, const int64_t[::1] q_times):
    """Per query (q_codes[i], q_times[i]): the first (lowest) index j with codes[j] ==
    q_codes[i] and times[j] == q_times[i], else -1; a code below 0 never matches
    (overlap.trace.tpu's `_join`, whose numpy rule by ranks and a sort it equals). An
    open-addressing table of the entries' first index per (code, time): no sort."""
    cdef Py_ssize_t n = codes.shape[0], nq = q_codes.shape[0], i, j, cap = 16
    if times.shape[0] != n or q_times.shape[0] != nq:
        raise ValueError("codes and times differ in length")
    while cap < 2 * n:
        cap *= 2
    cdef uint64_t mask = <uint64_t>(cap - 1), h
    slot_a = np.full(cap, -1, np.int64)
    out_a = np.full(nq, -1, np.int64)
    cdef int64_t[::1] slot = slot_a, out = out_a
    cdef int64_t c, t, k
    with nogil:
        for i in range(n):
            c = codes[i]
            if c < 0:
                continue
            t = times[i]
            h = _mix(<uint64_t>c * <uint64_t>0x9E3779B97F4A7C15 ^ <uint64_t>t) & mask
            while True:
                k = slot[h]
                if k < 0:
                    slot[h] = i
                    break
                if codes[k] == c and times[k] == t:
                    break  # the first index of the pair is kept
                h = (h + 1) & mask
        for i in range(nq):
            c = q_codes[i]
            if c < 0:
                continue
            t = q_times[i]
            h = _mix(<uint64_t>c * <uint64_t>0x9E3779B97F4A7C15 ^ <uint64_t>t) & mask
            while True:
                k = slot[h]
                if k < 0:
                    break
                if codes[k] == c and times[k] == t:
                    out[i] = k
                    break
                h = (h + 1) & mask
    return out_a


cdef inline uint64_t _feed(uint64_t h, object s, Py_ssize_t a, Py_ssize_t b):
    """FNV-1a over the code points s[a:b] (any of the str kinds), continued from `h`."""
    cdef int kind = PyUnicode_KIND(s)
    cdef void* data = PyUnicode_DATA(s)
    cdef Py_ssize_t i
    for i in range(a, b):
        h = (h ^ <uint64_t>PyUnicode_READ(kind, data, i)) * <uint64_t>0x100000001B3
    return h


cdef inline bint _same(object o, Py_ssize_t off, object s, Py_ssize_t a, Py_ssize_t b):
    """o[off:off + b - a] == s[a:b], code point by code point (the caller checks lengths)."""
    cdef int ko = PyUnicode_KIND(o), ks = PyUnicode_KIND(s)
    cdef void* do = PyUnicode_DATA(o)
    cdef void* ds = PyUnicode_DATA(s)
    cdef Py_ssize_t i
    for i in range(b - a):
        if PyUnicode_READ(ko, do, off + i) != PyUnicode_READ(ks, ds, a + i):
            return False
    return True


cdef str _DONE = "-done"


cdef uint64_t _HI = <uint64_t>0xFFFFFFFF00000000ULL  # a slot: hash's high half | op index
cdef uint64_t _LO = <uint64_t>0xFFFFFFFFULL


cdef inline Py_ssize_t _find_name(const int64_t* slot, uint64_t mask, uint64_t h, list op_names,
                                   object nm, Py_ssize_t at, Py_ssize_t ln):
    """The code of the op whose name is `nm` (at < 0) or nm's done name (`nm[:at] + "-done"
    + nm[at + 6:]`, ln - 1 code points) in the table `slot` (`_HI` of the hash, op index),
    -1 where none."""
    cdef Py_ssize_t j = <Py_ssize_t>(h & mask)
    cdef int64_t k
    cdef object o
    while True:
        k = slot[j]
        if k == -1:
            return -1
        if (<uint64_t>k & _HI) == (h & _HI):
            k &= <int64_t>_LO
            o = op_names[k]
            if at < 0:
                if PyUnicode_GET_LENGTH(o) == ln and _same(o, 0, nm, 0, ln):
                    return k
            elif PyUnicode_GET_LENGTH(o) == ln - 1 and _same(o, 0, nm, 0, at) \
                    and _same(o, at, _DONE, 0, 5) and _same(o, at + 5, nm, at + 6, ln):
                return k
        j = <Py_ssize_t>((<uint64_t>j + 1) & mask)


def async_name_codes(list names, list op_names):
    """`tpu._async_codes` without a Python str or dict entry per done name: per op of
    `op_names` (None or str) a code shared by the ops of an equal name (its first op's
    index; -1 for None); per name of `names` (None or str) the code of the ops of that
    name and of its done op's name (its last `-start` made `-done`), -1 where no op has it,
    -1 and -1 where the name is empty or None or has no `-start`. None where a value is
    neither None nor a str (the caller's Python rule answers). Equal as the Python rule is
    where it counts: a name's code equals an op's exactly where the names are equal. The
    done names are hashed and compared in pieces (the start name around its `-start`, then
    `-done`), never made. Each slot holds its op's index and the high half of its hash in one
    word (no second random read to compare hashes), and the names are looked up in blocks
    whose slots are asked for from memory first (random reads: 6.5 -> 5 ms for 36k names
    against 72k ops, warm)."""
    cdef Py_ssize_t n = len(names), m = len(op_names), i, j, ln, at, cap = 16, r, q, nb
    cdef object nm, o
    cdef uint64_t h, mask
    cdef int64_t k
    cdef Py_ssize_t b_i[_AHEAD]
    cdef Py_ssize_t b_at[_AHEAD]
    cdef Py_ssize_t b_ln[_AHEAD]
    cdef uint64_t b_h[2 * _AHEAD]
    if m >= (<Py_ssize_t>1 << 31):
        return None  # (an index must fit the slot's low half)
    while cap < 2 * m:
        cap *= 2
    mask = <uint64_t>(cap - 1)
    slot_a = np.full(cap, -1, np.int64)
    s_a = np.full(n, -1, np.int64)
    d_a = np.full(n, -1, np.int64)
    o_a = np.full(m, -1, np.int64)
    cdef int64_t[::1] slot = slot_a, sc = s_a, dc = d_a, oc = o_a
    cdef const int64_t* sl = &slot[0]
    for i in range(m):  # the ops' names: each distinct one's first op
        o = op_names[i]
        if o is None:
            continue
        if type(o) is not str:
            return None
        ln = PyUnicode_GET_LENGTH(o)
        h = _mix(_feed(<uint64_t>0xcbf29ce484222325, o, 0, ln) ^ <uint64_t>ln)
        j = <Py_ssize_t>(h & mask)
        while True:
            k = slot[j]
            if k == -1:
                slot[j] = <int64_t>((h & _HI) | <uint64_t>i)
                oc[i] = i
                break
            if (<uint64_t>k & _HI) == (h & _HI):
                k &= <int64_t>_LO
                if PyUnicode_GET_LENGTH(op_names[k]) == ln and _same(op_names[k], 0, o, 0, ln):
                    oc[i] = k
                    break
            j = (j + 1) & mask
    if not m:
        for i in range(n):
            nm = names[i]
            if nm is not None and type(nm) is not str:
                return None
        return s_a, d_a, o_a
    r = 0
    while r < n:
        # a block of names: hashes first, their slots asked for, then the lookups
        nb = 0
        while r < n and nb < _AHEAD:
            nm = names[r]
            if nm is not None:
                if type(nm) is not str:
                    return None
                ln = PyUnicode_GET_LENGTH(nm)
                at = (<str>nm).rfind("-start") if ln else -1
                if at >= 0:
                    b_i[nb], b_at[nb], b_ln[nb] = r, at, ln
                    # the name itself, and its done name: nm[:at] + "-done" + nm[at + 6:]
                    h = _mix(_feed(<uint64_t>0xcbf29ce484222325, nm, 0, ln) ^ <uint64_t>ln)
                    b_h[2 * nb] = h
                    __builtin_prefetch(sl + <Py_ssize_t>(h & mask))
                    h = _feed(<uint64_t>0xcbf29ce484222325, nm, 0, at)
                    h = _feed(h, _DONE, 0, 5)
                    h = _mix(_feed(h, nm, at + 6, ln) ^ <uint64_t>(ln - 1))
                    b_h[2 * nb + 1] = h
                    __builtin_prefetch(sl + <Py_ssize_t>(h & mask))
                    nb += 1
            r += 1
        for q in range(nb):
            i = b_i[q]
            nm = names[i]
            sc[i] = _find_name(sl, mask, b_h[2 * q], op_names, nm, -1, b_ln[q])
            dc[i] = _find_name(sl, mask, b_h[2 * q + 1], op_names, nm, b_at[q], b_ln[q])
    return s_a, d_a, o_a



cdef inline uint64_t _feed_b(uint64_t h, const uint8_t* s, Py_ssize_t n) noexcept nogil:
    """FNV-1a over the bytes s[:n], continued from `h`."""
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ <uint64_t>s[i]) * <uint64_t>0x100000001B3
    return h


cdef const uint8_t* _DONE_B = <const uint8_t*>b"-done"


cdef inline Py_ssize_t _find_span(const int64_t* slot, uint64_t mask, uint64_t h,
                                  const uint8_t* buf, const int64_t* fs, const int64_t* fe,
                                  const uint8_t* nm, Py_ssize_t at, Py_ssize_t ln) noexcept nogil:
    """`_find_name` over ops' names as UTF-8 spans of `buf` and a name as UTF-8 bytes `nm`
    (`ln` bytes; its `-start` at byte `at`, or at < 0 for the name itself)."""
    cdef Py_ssize_t j = <Py_ssize_t>(h & mask)
    cdef int64_t k
    cdef const uint8_t* o
    while True:
        k = slot[j]
        if k == -1:
            return -1
        if (<uint64_t>k & _HI) == (h & _HI):
            k &= <int64_t>_LO
            o = buf + fs[k]
            if at < 0:
                if fe[k] - fs[k] == ln and memcmp(o, nm, ln) == 0:
                    return k
            elif (fe[k] - fs[k] == ln - 1 and memcmp(o, nm, at) == 0
                    and memcmp(o + at, _DONE_B, 5) == 0
                    and memcmp(o + at + 5, nm + at + 6, ln - at - 6) == 0):
                return k
        j = <Py_ssize_t>((<uint64_t>j + 1) & mask)


def async_name_codes_at(list names, const uint8_t[::1] buf, const int64_t[::1] fs,
                        const int64_t[::1] fe):
    """`async_name_codes(names, op_names)` where the ops' names are the spans [fs[i], fe[i])
    of `buf` (valid UTF-8, the caller checked: `op_names` would be their decoded strs; best
    side by side, as `gather_spans` leaves them: read in order, not a cache miss each): the
    names are hashed and compared as UTF-8 bytes, no str made per op (the clocked many-ops
    shape's 72k copy-start/copy-done names: ~4 ms of strs). Equal strs are equal UTF-8
    bytes, and a name's last `-start` (ASCII: never inside a multi-byte character) is at
    the same place in either; so the codes match exactly where `async_name_codes`' do.
    None where a name is neither None nor a str, or has no UTF-8 form (a lone surrogate),
    or there are 2**31 ops or more."""
    cdef Py_ssize_t n = len(names), m = fs.shape[0], i, j, ln, at, cap = 16, r, q, nb
    cdef Py_ssize_t nbuf = buf.shape[0]
    cdef object nm
    cdef const char* u
    cdef const uint8_t* ub
    cdef const uint8_t* o
    cdef uint64_t h, mask
    cdef int64_t k
    cdef Py_ssize_t b_i[_AHEAD]
    cdef Py_ssize_t b_at[_AHEAD]
    cdef Py_ssize_t b_ln[_AHEAD]
    cdef const uint8_t* b_p[_AHEAD]
    cdef uint64_t b_h[2 * _AHEAD]
    if fe.shape[0] != m:
        raise ValueError("name starts and ends differ in length")
    if m >= (<Py_ssize_t>1 << 31):
        return None  # (an index must fit the slot's low half)
    for i in range(m):
        if fs[i] < 0 or fe[i] < fs[i] or fe[i] > nbuf:
            raise ValueError("span outside the buffer")
    while cap < 2 * m:
        cap *= 2
    mask = <uint64_t>(cap - 1)
    slot_a = np.full(cap, -1, np.int64)
    s_a = np.full(n, -1, np.int64)
    d_a = np.full(n, -1, np.int64)
    o_a = np.full(m, -1, np.int64)
    cdef int64_t[::1] slot = slot_a, sc = s_a, dc = d_a, oc = o_a
    cdef const int64_t* sl = &slot[0]
    cdef const uint8_t* b = &buf[0] if nbuf else NULL
    cdef const int64_t* pfs = &fs[0] if m else NULL
    cdef const int64_t* pfe = &fe[0] if m else NULL
    for i in range(m):  # the ops' names: each distinct one's first op
        o = b + fs[i]
        ln = fe[i] - fs[i]
        h = _mix(_feed_b(<uint64_t>0xcbf29ce484222325, o, ln) ^ <uint64_t>ln)
        j = <Py_ssize_t>(h & mask)
        while True:
            k = slot[j]
            if k == -1:
                slot[j] = <int64_t>((h & _HI) | <uint64_t>i)
                oc[i] = i
                break
            if (<uint64_t>k & _HI) == (h & _HI):
                k &= <int64_t>_LO
                if fe[k] - fs[k] == ln and memcmp(b + fs[k], o, ln) == 0:
                    oc[i] = k
                    break
            j = (j + 1) & mask
    r = 0
    while r < n:
        # a block of names: hashes first, their slots asked for, then the lookups
        nb = 0
        while r < n and nb < _AHEAD:
            nm = names[r]
            if nm is not None:
                if type(nm) is not str:
                    return None
                try:
                    u = PyUnicode_AsUTF8AndSize(nm, &ln)
                except UnicodeEncodeError:  # a lone surrogate: no UTF-8 form
                    return None
                ub = <const uint8_t*>u
                at = ln - 6
                while at >= 0 and memcmp(ub + at, b"-start", 6) != 0:
                    at -= 1
                if at >= 0 and m:
                    b_i[nb], b_at[nb], b_ln[nb], b_p[nb] = r, at, ln, ub
                    # the name itself, and its done name: nm[:at] + "-done" + nm[at + 6:]
                    h = _mix(_feed_b(<uint64_t>0xcbf29ce484222325, ub, ln) ^ <uint64_t>ln)
                    b_h[2 * nb] = h
                    __builtin_prefetch(sl + <Py_ssize_t>(h & mask))
                    h = _feed_b(<uint64_t>0xcbf29ce484222325, ub, at)
                    h = _feed_b(h, _DONE_B, 5)
                    h = _mix(_feed_b(h, ub + at + 6, ln - at - 6) ^ <uint64_t>(ln - 1))
                    b_h[2 * nb + 1] = h
                    __builtin_prefetch(sl + <Py_ssize_t>(h & mask))
                    nb += 1
            r += 1
        for q in range(nb):
            i = b_i[q]
            sc[i] = _find_span(sl, mask, b_h[2 * q], b, pfs, pfe, b_p[q], -1, b_ln[q])
            dc[i] = _find_span(sl, mask, b_h[2 * q + 1], b, pfs, pfe, b_p[q], b_at[q],
                               b_ln[q])
    return s_a, d_a, o_a


cdef uint8_t _NAME_STOP[256]  # bytes `boundary_names` leaves a name at: >= 0x80, a newline
cdef uint8_t _NAME_STOP_NUL[256]  # (`nul_left`: and a NUL)
for _i in range(256):
    _NAME_STOP[_i] = _i >= 0x80 or _i == 0x0A
    _NAME_STOP_NUL[_i] = _NAME_STOP[_i] or _i == 0


def boundary_names(const uint8_t[::1] buf, const int64_t[::1] fs, const int64_t[::1] fe,
                   bint nul_left=False):
    """`hlotext.async_boundaries_by_bytes` of the names [fs[i], fe[i]) of `buf`, in place:
    per name 1 (an async boundary: what is left after a trailing `.digits` ends with
    `-start` or `-done` after at least one more byte, or is `send` or `recv`), 0 (not one),
    -1 (left to the regexes: empty, a byte >= 0x80 or a newline, or a trailing run of more
    than `_DIGITS_MAX` digits). Why: numpy walks the trailing digits back one step for all
    names at a time, a fancy index per step, on 72k copy-start/copy-done names. `nul_left`:
    a name holding a NUL is left too (-1), so that every name decided (0 or 1) is one
    `MetaTable.span_strings` gives as a str of its own: non-empty ASCII without a NUL
    (`tpu._join_names` then needs no second walk over 72k names to check them)."""
    cdef Py_ssize_t n = fs.shape[0], i, p, lo, hi, last, core, nb = buf.shape[0]
    _spans_within(fs, fe, nb, "name")
    out_a = np.full(n, -1, np.int8)
    if n == 0 or nb == 0:
        return out_a
    cdef int8_t[::1] out = out_a
    cdef const uint8_t* b = &buf[0]
    cdef bint bad, has_n, dotted
    cdef const uint8_t* stop = &_NAME_STOP[0]
    if nul_left:
        stop = &_NAME_STOP_NUL[0]
    with nogil:
        for i in range(n):
            if i + _AHEAD < n:
                __builtin_prefetch(b + fs[i + _AHEAD])
            lo = fs[i]
            hi = fe[i]
            if hi == lo:
                continue
            bad = False
            for p in range(lo, hi):
                if stop[b[p]]:
                    bad = True
                    break
            if bad:
                continue
            last = hi - 1  # the last byte that is not a digit (lo - 1: all digits)
            while last >= lo and 0x30 <= b[last] <= 0x39:
                last -= 1
            if hi - 1 - last > _DIGITS_MAX:
                continue
            has_n = last < hi - 1
            dotted = has_n and last >= lo and b[last] == 0x2E
            if has_n and not dotted:  # digits without a dot: neither regex matches
                out[i] = 0
                continue
            core = last if dotted else hi  # the end of what is left
            out[i] = ((core - lo >= 7 and memcmp(b + core - 6, b"-start", 6) == 0)
                      or (core - lo >= 6 and memcmp(b + core - 5, b"-done", 5) == 0)
                      or (core - lo == 4 and (memcmp(b + lo, b"send", 4) == 0
                                              or memcmp(b + lo, b"recv", 4) == 0)))
    return out_a


def span_codes(const uint8_t[::1] buf, const int64_t[::1] fs, const int64_t[::1] fe):
    """The distinct byte strings among the spans [fs[i], fe[i]) of `buf`, by content: (per
    span its string's number, in order of first occurrence; each number's first span). Why:
    the copy rules decide once per distinct head of a copy-start's text (a few shapes over
    36k copy ops), and a bytes object and a dict lookup per copy cost more than the rule."""
    cdef Py_ssize_t n = fs.shape[0], i, nb = buf.shape[0]
    _spans_within(fs, fe, nb, "span")
    codes_a = np.empty(n, np.int64)
    first_l = []
    cdef int64_t[::1] codes = codes_a
    cdef _Intern seen = _Intern()
    cdef const uint8_t* b = &buf[0] if nb else NULL
    cdef int32_t c, c0 = -1, c1 = -1
    cdef int64_t s0 = 0, n0 = 0, s1 = 0, n1 = 0, ln
    for i in range(n):
        # the last two strings met first, by their bytes (a many-ops capture's copies
        # alternate between a D2H and an H2D head: ~75 bytes hashed a word at a time and
        # looked up per copy, where one compare answers), else the table
        ln = fe[i] - fs[i]
        if c0 >= 0 and ln == n0 and memcmp(b + fs[i], b + s0, <size_t>ln) == 0:
            c = c0
        elif c1 >= 0 and ln == n1 and memcmp(b + fs[i], b + s1, <size_t>ln) == 0:
            c = c1
        else:
            c = seen.code(b, 5, <uint64_t>ln, fs[i])
        if c == len(first_l):  # a new string (numbers are given in order)
            first_l.append(i)
        if c != c0:
            c1, s1, n1 = c0, s0, n0
            c0, s0, n0 = c, fs[i], ln
        codes[i] = c
    return codes_a, np.array(first_l, np.int64)


cdef bint _SPACE[256]  # str.isspace() of the ASCII bytes (str.strip's set; hlotext._ASCII_SPACE)
for _c in (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F, 0x20):
    _SPACE[_c] = True


def instruction_name_strings(const uint8_t[::1] buf, const int64_t[::1] lo,
                             const int64_t[::1] hi, const int64_t[::1] eq,
                             const int64_t[::1] at):
    """`hlotext.instruction_name_spans` of the texts `at` ([lo, hi) of `buf`, their first
    ` = ` at `eq`, -1 where none), each name span made a str, in one walk: a list of strs,
    or None where a text's span is not its answer (whitespace to strip), or holds a NUL or a
    byte >= 0x80 (the caller then takes the numpy rule and the str rule, as before). Why:
    the rule is a few byte tests per text, ~20 numpy passes over 4096 texts a block, and a
    gather, a decode and a split after them (~4 ms on the many-ops capture's 36k copies)."""
    cdef Py_ssize_t n = at.shape[0], nt = lo.shape[0], nb = buf.shape[0], i, k, p
    cdef int64_t s, e, q, ns, ne
    cdef uint8_t first, last
    cdef bint pct
    if hi.shape[0] != nt or eq.shape[0] != nt:
        raise ValueError("text starts, ends and ` = ` positions differ in length")
    for i in range(n):
        k = at[i]
        if k < 0 or k >= nt or lo[k] < 0 or hi[k] < lo[k] or hi[k] > nb:
            raise ValueError("text outside the buffer")
    if nb == 0:  # (every text is empty)
        return [""] * n
    cdef const uint8_t* b = &buf[0]
    out = []
    for i in range(n):
        k = at[i]
        s, e, q = lo[k], hi[k], eq[k]
        if e == s:  # an empty text: its name is empty
            out.append("")
            continue
        first, last = b[s], b[e - 1]
        pct = first == 0x25 and not _SPACE[last]
        if pct:
            ns = s + 1
            ne = q if q >= 0 else e
            if ne < ns or q >= e:
                return None
            if ne > ns and (_SPACE[b[ns]] or _SPACE[b[ne - 1]]):
                return None
        elif first != 0x25 and not _SPACE[first] and not _SPACE[last]:
            ns, ne = s, e
        else:
            return None
        for p in range(ns, ne):
            if b[p] == 0 or b[p] >= 0x80:
                return None
        out.append(PyUnicode_DecodeASCII(<char*>(b + ns), ne - ns, NULL))
    return out


def async_pairs_at(list names, const int64_t[::1] inv, const uint8_t[::1] buf,
                   const int64_t[::1] fs, const int64_t[::1] fe, const int64_t[::1] ps,
                   const int64_t[::1] pd):
    """Per Async event q (its start op's instruction name `names[inv[q]]`): whether the op
    span `ps[q]` of `buf` ([fs, fe), valid UTF-8; -1: no op) is that name, and whether the
    op span `pd[q]` is its done name (the last `-start` made `-done`); a name that is None,
    empty or without `-start` matches neither. (`async_name_codes_at` then a hash join
    equal these where each boundary time is one event's: the caller found that event by its
    time, so one comparison per event is left, no hash of 72k names.) Two uint8 arrays, or
    None where a name is neither None nor a str, or has no UTF-8 form (a lone surrogate)."""
    cdef Py_ssize_t n = len(names), m = fs.shape[0], nq = inv.shape[0], q, r, p, ln, at
    cdef Py_ssize_t nbuf = buf.shape[0]
    cdef object nm
    cdef const char* u
    cdef const uint8_t* ub
    cdef const uint8_t* o
    if fe.shape[0] != m:
        raise ValueError("name starts and ends differ in length")
    if ps.shape[0] != nq or pd.shape[0] != nq:
        raise ValueError("events and their ops differ in length")
    for p in range(m):
        if fs[p] < 0 or fe[p] < fs[p] or fe[p] > nbuf:
            raise ValueError("span outside the buffer")
    for q in range(nq):
        if inv[q] < 0 or inv[q] >= n or ps[q] < -1 or ps[q] >= m or pd[q] < -1 or pd[q] >= m:
            raise ValueError("index out of range")
    for r in range(n):  # (as `async_name_codes_at`: every name a str or None, else None)
        nm = names[r]
        if nm is not None and type(nm) is not str:
            return None
    ms_a = np.zeros(nq, np.uint8)
    md_a = np.zeros(nq, np.uint8)
    if nq == 0 or m == 0:
        return ms_a, md_a
    cdef uint8_t[::1] ms = ms_a, md = md_a
    cdef const uint8_t* b = &buf[0] if nbuf else <const uint8_t*>b""
    for q in range(nq):
        if q + _AHEAD < nq:  # (the ops' names where they lie: a metadata entry each, apart)
            if ps[q + _AHEAD] >= 0:
                __builtin_prefetch(b + fs[ps[q + _AHEAD]])
            if pd[q + _AHEAD] >= 0:
                __builtin_prefetch(b + fs[pd[q + _AHEAD]])
        if ps[q] < 0 and pd[q] < 0:
            continue
        nm = names[inv[q]]
        if nm is None:
            continue
        try:
            u = PyUnicode_AsUTF8AndSize(nm, &ln)
        except UnicodeEncodeError:  # a lone surrogate: no UTF-8 form
            return None
        ub = <const uint8_t*>u
        at = ln - 6
        while at >= 0 and memcmp(ub + at, b"-start", 6) != 0:
            at -= 1
        if at < 0:
            continue
        p = ps[q]
        if p >= 0:
            ms[q] = fe[p] - fs[p] == ln and memcmp(b + fs[p], ub, ln) == 0
        p = pd[q]
        if p >= 0:
            o = b + fs[p]
            md[q] = (fe[p] - fs[p] == ln - 1 and memcmp(o, ub, at) == 0
                     and memcmp(o + at, _DONE_B, 5) == 0
                     and memcmp(o + at + 5, ub + at + 6, ln - at - 6) == 0)
    return ms_a, md_a


cdef inline Py_ssize_t _seek(const int64_t* t, Py_ssize_t n, int64_t x,
                             Py_ssize_t hint) noexcept nogil:
    """The first index i of the ascending t[:n] with t[i] >= x (n where none), searched
    from `hint` outward by doubling steps, then by halves: O(1) for queries that ascend
    near the last answer (a capture's events in time order), O(log n) for any."""
    cdef Py_ssize_t lo, hi, step = 1
    if hint < 0:
        hint = 0
    if hint > n:
        hint = n
    if hint < n and t[hint] < x:  # forward: t[lo] < x
        lo = hint
        hi = hint + 1
        while hi < n and t[hi] < x:
            lo = hi
            hi = hi + step
            step <<= 1
        if hi > n:
            hi = n
        lo += 1
    else:  # backward: x <= t[hi] (or hi == n)
        hi = hint
        lo = hint - 1
        while lo >= 0 and t[lo] >= x:
            hi = lo
            lo = lo - step
            step <<= 1
        if lo < 0:
            lo = 0
        else:
            lo += 1
    while lo < hi:  # the answer lies in [lo, hi]
        step = (lo + hi) >> 1
        if t[step] < x:
            lo = step + 1
        else:
            hi = step
    return lo


cdef inline void _boundary(const int64_t* bt, Py_ssize_t nb, int64_t t, Py_ssize_t* hb,
                           const int64_t* at, Py_ssize_t na, const int64_t* bop, Py_ssize_t* ha,
                           int64_t* ev, int64_t* place) noexcept nogil:
    """One side of `async_pairs_by_time` for one Async event: the boundary event whose time
    (`bt`, rising strictly, searched from the hint *hb) is `t` into *ev, and its op's place
    in `at` (searched from *ha) into *place; each left as it was where there is none."""
    cdef Py_ssize_t e = _seek(bt, nb, t, hb[0]), p
    hb[0] = e
    if e < nb and bt[e] == t:
        ev[0] = e
        if na:
            p = _seek(at, na, bop[e], ha[0])
            ha[0] = p
            if p < na and at[p] == bop[e]:
                place[0] = p


def async_pairs_by_time(list names, const int64_t[::1] inv, const uint8_t[::1] buf,
                        const int64_t[::1] fs, const int64_t[::1] fe, const int64_t[::1] at,
                        const int64_t[::1] b0, const int64_t[::1] b1, const int64_t[::1] bop,
                        const int64_t[::1] starts, const int64_t[::1] ends):
    """`tpu._pairs_by_time` in one call: per Async event q (begin `starts[q]`, end
    `ends[q]`, its start op's instruction name `names[inv[q]]`), the boundary event whose
    begin `b0` is its begin where that event's op (`bop`, an op index; its name the span of
    `buf` at that op's place in `at`, ascending, [fs, fe)) is that name, and the boundary
    event whose end `b1` is its end where its op is the done name (`async_pairs_at`'s
    comparison); -1 where none. Two int64 arrays (start, done events), or None where `b0`
    or `b1` does not rise strictly, there are no boundary events, or `async_pairs_at` would
    say None. Why: the numpy glue around `async_pairs_at` (a table of op positions, two
    binary searches, five gathers and wheres over 36k Async events) cost ~2.5 ms on the
    clocked many-ops capture; here each event's times are found from the last one's
    (`_seek`: the events ascend), positions in `at` likewise."""
    cdef Py_ssize_t nb = b0.shape[0], nq = inv.shape[0], na = at.shape[0], q, e, h0 = 0
    cdef Py_ssize_t h1 = 0, hp = 0, hd = 0, p
    if b1.shape[0] != nb or bop.shape[0] != nb:
        raise ValueError("boundary times and ops differ in length")
    if starts.shape[0] != nq or ends.shape[0] != nq:
        raise ValueError("events and their times differ in length")
    if fs.shape[0] != na:
        raise ValueError("ops and their names differ in length")
    for p in range(1, na):
        if at[p] <= at[p - 1]:
            raise ValueError("op places not ascending")
    if nb == 0:
        return None
    for e in range(1, nb):
        if b0[e] <= b0[e - 1] or b1[e] <= b1[e - 1]:
            return None  # (a time twice, or out of order: the hash join answers)
    ps_a = np.full(nq, -1, np.int64)
    pd_a = np.full(nq, -1, np.int64)
    es_a = np.full(nq, -1, np.int64)
    ed_a = np.full(nq, -1, np.int64)
    cdef int64_t[::1] ps = ps_a, pd = pd_a, es = es_a, ed = ed_a
    cdef const int64_t* pa = &at[0] if na else NULL
    if nq:
        with nogil:
            for q in range(nq):
                _boundary(&b0[0], nb, starts[q], &h0, pa, na, &bop[0], &hp, &es[q], &ps[q])
                _boundary(&b1[0], nb, ends[q], &h1, pa, na, &bop[0], &hd, &ed[q], &pd[q])
    got = async_pairs_at(names, inv, buf, fs, fe, ps, pd)
    if got is None:
        return None
    cdef const uint8_t[::1] ms = got[0], md = got[1]
    for q in range(nq):
        if not ms[q]:
            es[q] = -1
        if not md[q]:
            ed[q] = -1
    return es_a, ed_a


# ---------------------------------------------------------------------------------------------
# CUPTI `*_details` stats


cdef inline bint _split_space(uint8_t c) noexcept nogil:
    """An ASCII character `str.split()` splits on (Py_UNICODE_ISSPACE below 0x80)."""
    return c == 32 or 9 <= c <= 13 or 28 <= c <= 31


# Per byte: 1 where `str.split()` splits (`_split_space`), 2 for ':', else 0 (`_Details.read`)
cdef uint8_t _DCLASS[256]


cdef int _init_dclass() except -1:
    cdef int c
    for c in range(256):
        _DCLASS[c] = 1 if _split_space(<uint8_t>c) else (2 if c == 58 else 0)
    return 0


_init_dclass()


cdef enum:
    _D_SIZE = 0
    _D_SRC = 1
    _D_DST = 2
    _D_ASYNC = 3
    _D_KIND = 4


cdef inline int _details_key(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    """Which key of a memcpy details token `s[:n]` (before its first ':') is, else -1."""
    if n == 4 and memcmp(s, b"size", 4) == 0:
        return _D_SIZE
    if n == 8 and memcmp(s, b"kind_src", 8) == 0:
        return _D_SRC
    if n == 8 and memcmp(s, b"kind_dst", 8) == 0:
        return _D_DST
    if n == 5 and memcmp(s, b"async", 5) == 0:
        return _D_ASYNC
    if n == 4 and memcmp(s, b"kind", 4) == 0:
        return _D_KIND
    return -1


def memcpy_details(list values, bint columns=False, bint first_size=False):
    """Per value of a memcpy's `memcpy_details` stat, what `gpu._memcpy_facts` makes of it:
    (bytes, source kind, destination kind, async (None, True or False), bytes known), or None
    where this does not answer (not an ASCII `str`, or a size that is not plain digits) and
    the caller reads the value itself. With `columns`, the same as five columns, whether
    each answered, and the kinds' texts: (bytes (int64), source and destination kinds (codes
    into the texts: int8 where there are at most 127, else int32), asyncs (int8: 0 None, 1
    False, 2 True), bytes known (bool), answered (uint8), the texts (a list)), 0 where it did
    not (a tuple per value: ~110 bytes
    each, 100k distinct values on a capture whose copies all differ in size). Tokens
    are split where `str.split()` splits and keyed before their first ':', the last of a
    key winning, as `names.parse_details` reads them.
    With `first_size`, the size is the first `size` token's, as ROCm's rule reads it
    (`vendors._details_size`); the other keys as before.
    Why: a capture whose copies all differ in size has a distinct value per copy, ~2 us each
    in Python (100k copies: 0.22 s of a 0.56 s report)."""
    cdef Py_ssize_t n = len(values), i
    cdef _Details d = _Details(n, columns)
    d.first_size = first_size
    cdef object v
    for i in range(n):
        v = values[i]
        if type(v) is str and PyUnicode_IS_ASCII(v):
            d.read(i, <const uint8_t*>PyUnicode_DATA(v), PyUnicode_GET_LENGTH(v))
    return d.result()


def memcpy_details_at(data, const int8_t[::1] kind, const uint64_t[::1] ival,
                      const int64_t[::1] vpos, int k_str, int k_ref=-1, names=None,
                      const int32_t[::1] pos=None, const int32_t[::1] ns=None,
                      const int32_t[::1] ne=None, bint first_size=False):
    """`memcpy_details(values, columns=True, first_size)` of stat values as the decoder's
    records give them (`kind`, `ival`: a string's length, `vpos`: where it lies in `data`),
    read where they lie: a value of kind `k_str` whose bytes are ASCII is answered as that
    text is, any other is not (answered 0: the caller reads it as an object). With `k_ref`
    and a plane's stat names as `statids.LazyStatNames` holds them (`names`: their bytes;
    `pos`: id -> row, -1 none; `ns`/`ne`: each row's name span; all int32), a value of kind
    `k_ref` (`ival` the id) is its name's text, answered where that name is ASCII, as a
    ref's `str` is; an id without a name is not answered. `first_size`: as
    `memcpy_details`' (ROCm's HIP calls: `vendors.hip_sizes`). Why: a capture of a million
    copies, each its own details, made a million `str` (and the bytes and dict entries that
    found each one's object) to parse them: 0.7 s and ~270 MiB on the read's peak; CUPTI
    writes them as refs (our H100/H200 captures), whose names were each decoded to a `str`
    the same way (88 MiB a million)."""
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* b = &mv[0]
    cdef const uint8_t[::1] nv
    cdef const uint8_t* nb = NULL
    cdef Py_ssize_t n = kind.shape[0], i, r, nlen = 0, npos = 0
    cdef int64_t a, e
    if ival.shape[0] != n or vpos.shape[0] != n:
        raise ValueError("kind, ival and vpos differ in length")
    if names is not None:
        if pos is None or ns is None or ne is None or ns.shape[0] != ne.shape[0]:
            raise ValueError("names need pos, ns and ne of one length")
        nv = names
        nlen, npos = nv.shape[0], pos.shape[0]
        if nlen:
            nb = &nv[0]
    cdef _Details d = _Details(n, True)
    d.first_size = first_size
    for i in range(n):
        if kind[i] == k_str:
            if vpos[i] < 0 or <uint64_t>vpos[i] + ival[i] > <uint64_t>mv.shape[0]:
                continue
            if _ascii(b + vpos[i], <Py_ssize_t>ival[i]):
                d.read(i, b + vpos[i], <Py_ssize_t>ival[i])
        elif kind[i] == k_ref and nb != NULL:
            if ival[i] >= <uint64_t>npos:
                continue
            r = pos[ival[i]]
            if r < 0 or r >= ns.shape[0]:
                continue
            a, e = ns[r], ne[r]
            if a < 0 or e < a or e > nlen:
                continue
            if _ascii(nb + a, <Py_ssize_t>(e - a)):
                d.read(i, nb + a, <Py_ssize_t>(e - a))
    return d.result()


@cython.final
cdef class _Details:
    """`memcpy_details`' answers, filled a value at a time (`read`), as tuples or columns.
    Columns hold the kinds as codes into `names` (one str per distinct text) and the async
    flags as codes 0 (None), 1 (False), 2 (True): a million distinct values held a pointer
    per value and kind (and lists of them, then the caller's arrays, both at once: 48 MB),
    for a few kinds and flags; the reader keeps the copies' columns coded the same way."""
    cdef Py_ssize_t n
    cdef bint columns
    cdef bint first_size  # (the first `size` token wins, not the last: `memcpy_details`)
    cdef list out
    cdef dict kinds  # value text -> its code (a few kinds over many copies)
    cdef list names  # code -> the text, one str object each
    cdef int32_t src, dst  # (the previous value's codes: `code`)
    cdef object sizes_a, knowns_a, oks_a, srcs_a, dsts_a, asys_a
    cdef int64_t[::1] sizes
    cdef uint8_t[::1] knowns, oks
    cdef int32_t[::1] srcs, dsts  # (once widened: `wide`)
    cdef int8_t[::1] srcs8, dsts8  # (while every code is below 128)
    cdef bint wide
    cdef int8_t[::1] asys

    def __cinit__(self, Py_ssize_t n, bint columns):
        self.n, self.columns = n, columns
        self.first_size = False
        self.kinds, self.names = {}, []
        self.src = self.dst = -1
        if columns:
            self.sizes_a, self.knowns_a, self.oks_a = (np.zeros(n, np.int64),
                                                       np.zeros(n, np.uint8),
                                                       np.zeros(n, np.uint8))
            self.sizes, self.knowns, self.oks = self.sizes_a, self.knowns_a, self.oks_a
            # (the kinds' codes written as int8, widened to int32 at the 128th kind: a few
            # kinds over a million values, a byte each, and no wider array made first)
            self.srcs_a, self.dsts_a = np.zeros(n, np.int8), np.zeros(n, np.int8)
            self.asys_a = np.zeros(n, np.int8)
            self.srcs8, self.dsts8, self.asys = self.srcs_a, self.dsts_a, self.asys_a
            self.wide = False
        else:
            self.out = [None] * n

    cdef int read(self, Py_ssize_t i, const uint8_t* s, Py_ssize_t ln) except -1:
        """Value i, the ASCII text s[:ln]: answered where its size is plain digits."""
        cdef Py_ssize_t vs[5]
        cdef Py_ssize_t ve[5]
        cdef Py_ssize_t p, t, c, k
        cdef int64_t size
        cdef int8_t a
        for k in range(5):
            vs[k] = -1
        cdef uint8_t x
        p = 0
        while p < ln:
            while p < ln and _DCLASS[s[p]] == 1:
                p += 1
            t = p
            c = -1
            # (one table read a character: a space and a ':' tested as five compares each
            # were half of a million values' parse)
            while p < ln:
                x = _DCLASS[s[p]]
                if x:
                    if x == 1:
                        break
                    if c < 0:  # the token's first ':'
                        c = p
                p += 1
            if c >= 0:
                k = _details_key(s + t, c - t)
                if k >= 0 and not (self.first_size and k == _D_SIZE and vs[k] >= 0):
                    vs[k], ve[k] = c + 1, p
        # the size: plain digits (1-15 of them: below 2**53 when read), else the caller's
        size = -1
        if vs[_D_SIZE] >= 0:
            if not 1 <= ve[_D_SIZE] - vs[_D_SIZE] <= 15:
                return 0
            size = 0
            for p in range(vs[_D_SIZE], ve[_D_SIZE]):
                if not 48 <= s[p] <= 57:
                    return 0
                size = size * 10 + (s[p] - 48)
            if size >= (1 << 53):  # (no byte count a copy can have: unknown, as the caller)
                size = -1
        self.src = self.code(s, vs[_D_SRC], ve[_D_SRC], self.src)
        self.dst = self.code(s, vs[_D_DST], ve[_D_DST], self.dst)
        if vs[_D_ASYNC] < 0:
            a = 0
        else:
            a = 2 if ve[_D_ASYNC] - vs[_D_ASYNC] == 1 and s[vs[_D_ASYNC]] == 49 else 1  # "1"
        if self.columns:
            self.sizes[i] = size if size > 0 else 0
            if not self.wide and (self.src > 127 or self.dst > 127):
                self.srcs_a, self.dsts_a = (self.srcs_a.astype(np.int32),
                                            self.dsts_a.astype(np.int32))
                self.srcs, self.dsts, self.wide = self.srcs_a, self.dsts_a, True
            if self.wide:
                self.srcs[i], self.dsts[i] = self.src, self.dst
            else:
                self.srcs8[i], self.dsts8[i] = <int8_t>self.src, <int8_t>self.dst
            self.asys[i] = a
            self.knowns[i] = not (vs[_D_KIND] >= 0 and size <= 0)
            self.oks[i] = 1
        else:
            self.out[i] = (size if size > 0 else 0, self.names[self.src], self.names[self.dst],
                           None if a == 0 else a == 2, not (vs[_D_KIND] >= 0 and size <= 0))
        return 0

    cdef int32_t code(self, const uint8_t* s, Py_ssize_t a, Py_ssize_t b,
                      int32_t last) except -1:
        """The code of the kind text s[a:b] (ASCII; "unknown" where absent, a < 0): `last`
        (the previous value's) where the text is its own (copies come in runs of one kind:
        no text made and looked up each), else through `kinds`."""
        cdef const uint8_t* p = s + a
        cdef Py_ssize_t ln = b - a
        cdef object t
        if a < 0:
            p, ln = <const uint8_t*>_UNKNOWN, 7
        if last >= 0:
            t = self.names[last]
            if PyUnicode_GET_LENGTH(t) == ln and memcmp(PyUnicode_DATA(t), p, ln) == 0:
                return last
        t = PyUnicode_DecodeASCII(<const char*>p, ln, NULL)
        got = self.kinds.get(t)
        if got is None:
            got = self.kinds[t] = len(self.names)
            self.names.append(t)
        return got

    cdef object result(self):
        if self.columns:
            # (the flags as bool: the same bytes)
            return (self.sizes_a, self.srcs_a, self.dsts_a, self.asys_a,
                    self.knowns_a.view(np.bool_), self.oks_a, self.names)
        return self.out


cdef const char* _UNKNOWN = b"unknown"  # (a kind absent from the details)


# ---------------------------------------------------------------------------------------------
# A compiled program's HloProto, read without protobuf (`overlap.trace.programs.hlo_message`)
#
# What `trace_ops.program_from_proto`, `program.offload_inventory` and `programs.ProgramCopies`
# read of the message, as objects with upb's field names and values: a capture's programs were
# read through upb's wrappers, a wrapper per field read (~3.7 us an instruction to build a
# program, ~2 us to take its stock; 32 bucketed programs ~60 ms) after `import
# google.protobuf` (~14 ms). `hlo_lite` answers only where upb would parse the bytes to the
# same values: every field of overlap/trace/protos/hlo.proto is checked as upb checks it (wire
# types, varint and length bounds, UTF-8 of string fields, nesting), and anything it is not
# sure of is refused (None: upb reads it) -- a known field of another wire type (upb keeps it
# as unknown), a group, a singular message field written twice (upb merges them), an int32
# value beyond int32 (upb wraps it), nesting beyond 64 (upb's limit: 100). A repeated scalar
# is read packed or not, as upb does; a scalar written twice keeps its last value.

cdef class HLayout:
    cdef readonly int64_t memory_space


cdef class HShape:
    cdef readonly int32_t element_type
    cdef readonly list dimensions
    cdef readonly list tuple_shapes
    cdef readonly HLayout layout


cdef class HMeta:
    cdef readonly str op_name
    cdef readonly int32_t stack_frame_id


cdef class HInstr:
    cdef readonly str name
    cdef readonly str opcode
    cdef readonly HShape shape
    cdef readonly HMeta metadata
    cdef readonly int64_t parameter_number
    cdef readonly int64_t tuple_index
    cdef readonly int64_t id
    cdef readonly list operand_ids
    cdef readonly list control_predecessor_ids
    cdef readonly list called_computation_ids


cdef class HComp:
    cdef readonly str name
    cdef readonly list instructions
    cdef readonly int64_t id
    cdef readonly int64_t root_id


cdef class HLoc:
    cdef readonly int32_t file_name_id
    cdef readonly int32_t function_name_id
    cdef readonly int32_t line
    cdef readonly int32_t column
    cdef readonly int32_t end_line
    cdef readonly int32_t end_column


cdef class HFrame:
    cdef readonly int32_t file_location_id
    cdef readonly int32_t parent_frame_id


cdef class HFrames:
    cdef readonly list file_names
    cdef readonly list function_names
    cdef readonly list file_locations
    cdef readonly list stack_frames


cdef class HModule:
    cdef readonly str name
    cdef readonly str entry_computation_name
    cdef readonly list computations
    cdef readonly int64_t id
    cdef readonly int64_t entry_computation_id
    cdef readonly HFrames stack_frame_index


cdef class HBufLoc:
    cdef readonly str instruction_name
    cdef readonly list shape_index
    cdef readonly int64_t instruction_id


cdef class HLogical:
    cdef readonly int64_t id
    cdef readonly int64_t size
    cdef readonly HBufLoc defined_at
    cdef readonly int64_t color


cdef class HEvent:
    cdef readonly int32_t kind
    cdef readonly int64_t buffer_id
    cdef readonly str instruction_name
    cdef readonly int64_t share_with_canonical_id


cdef class HTrace:
    cdef readonly list events


cdef class HBuffers:
    cdef readonly list logical_buffers
    cdef readonly list heap_simulator_traces


cdef class HProto:
    cdef readonly HModule hlo_module
    # (kept where asked, `hlo_lite(buffers=True)`: the heap simulation `overlap.hlo.heap`
    # replays; None otherwise, checked as upb checks it)
    cdef readonly HBuffers buffer_assignment


class _Refused(Exception):
    pass


cdef enum:
    _H_DEPTH = 64
    # the messages `hlo_lite` checks without keeping (`_hcheck`'s kinds)
    K_BUFFERS = 1
    K_LOGICAL = 2
    K_LOCATION = 3
    K_ALLOCATION = 4
    K_ASSIGNED = 5
    K_HEAPTRACE = 6
    K_EVENT = 7
    K_SCHEDULE = 8
    K_SEQENTRY = 9
    K_SEQUENCE = 10
    # field kinds
    F_V = 1      # a varint
    F_VR = 2     # a repeated varint (packed or not)
    F_S = 3      # a string
    F_M = 4      # a singular message (of the kind in the table's second column)
    F_MR = 5     # a repeated message


# (kind, field number) -> (field kind, message kind) of the messages only checked; 0: unknown
cdef int _hfield(int kind, uint64_t fn, int* sub) noexcept nogil:
    sub[0] = 0
    if kind == K_BUFFERS:
        if fn == 1:
            sub[0] = K_LOGICAL
            return F_MR
        if fn == 3:
            sub[0] = K_ALLOCATION
            return F_MR
        if fn == 4:
            sub[0] = K_HEAPTRACE
            return F_MR
    elif kind == K_LOGICAL:
        if fn == 1 or fn == 2 or fn == 4:
            return F_V
        if fn == 3:
            sub[0] = K_LOCATION
            return F_M
    elif kind == K_LOCATION:
        if fn == 2:
            return F_S
        if fn == 3:
            return F_VR
        if fn == 4:
            return F_V
    elif kind == K_ALLOCATION:
        if fn in (1, 2, 3, 5, 6, 7, 8, 11, 12):
            return F_V
        if fn == 9:
            sub[0] = K_ASSIGNED
            return F_MR
    elif kind == K_ASSIGNED:
        if fn == 1 or fn == 2 or fn == 3:
            return F_V
    elif kind == K_HEAPTRACE:
        if fn == 1:
            sub[0] = K_EVENT
            return F_MR
        if fn == 2 or fn == 3:
            return F_V
    elif kind == K_EVENT:
        if fn == 1 or fn == 2 or fn == 5:
            return F_V
        if fn == 3 or fn == 4:
            return F_S
    elif kind == K_SCHEDULE:
        if fn == 1:
            sub[0] = K_SEQENTRY
            return F_MR
    elif kind == K_SEQENTRY:
        if fn == 1:
            return F_V
        if fn == 2:
            sub[0] = K_SEQUENCE
            return F_M
    elif kind == K_SEQUENCE:
        if fn == 1:
            return F_VR
    return 0


cdef Py_ssize_t _hnext(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, uint64_t* fn,
                       int* wt) except -2:
    """The next field's tag at p: its value's position; a refusal where upb would not read it
    as we do (a damaged tag: upb fails, and a group: upb reads it, we do not)."""
    p = _tag(b, p, end, fn, wt)
    if p < 0 or wt[0] == 3 or wt[0] == 4 or wt[0] == 6 or wt[0] == 7:
        raise _Refused
    return p


cdef inline Py_ssize_t _hskip(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int wt) except -2:
    cdef uint64_t v
    if wt == 2:
        p = _size(b, p, end, &v)
    elif wt == 0:
        p = _varint(b, p, end, &v)
    elif wt == 1:
        p = p + 8 if p + 8 <= end else E_PAST
    elif wt == 5:
        p = p + 4 if p + 4 <= end else E_PAST
    else:
        p = E_WT
    if p < 0:
        raise _Refused
    return p


cdef inline Py_ssize_t _hvarint(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int wt,
                                uint64_t* v) except -2:
    if wt != 0:
        raise _Refused
    p = _varint(b, p, end, v)
    if p < 0:
        raise _Refused
    return p


cdef inline int32_t _hint32(uint64_t v) except? -1:
    # (an int32 field: a value beyond int32 upb wraps, refused here; a negative one is written
    # as its int64's ten bytes)
    cdef int64_t s = <int64_t>v
    if s < -2147483648 or s > 2147483647:
        raise _Refused
    return <int32_t>s


cdef inline Py_ssize_t _hlen(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int wt,
                             Py_ssize_t* q) except -2:
    if wt != 2:
        raise _Refused
    p = _len(b, p, end, q)
    if p < 0:
        raise _Refused
    return p


cdef Py_ssize_t _htext(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int wt,
                       Py_ssize_t* q) except -2:
    """A string field's value at p: its start (returned) and end (q), its UTF-8 checked
    (invalid: upb refuses the whole message)."""
    p = _hlen(b, p, end, wt, q)
    if not _utf8_ok(b + p, q[0] - p):
        raise _Refused
    return p


cdef str _hstr(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int wt, Py_ssize_t* nxt):
    """A string field's value at p as a `str` (`_htext`); `nxt`: the position after it."""
    p = _htext(b, p, end, wt, nxt)
    if _ascii(b + p, nxt[0] - p):
        return PyUnicode_DecodeASCII(<const char*>(b + p), nxt[0] - p, NULL)
    return PyBytes_FromStringAndSize(<char*>(b + p), nxt[0] - p).decode("utf-8")


cdef Py_ssize_t _hvalues(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int wt,
                         list out) except -2:
    """A repeated int64's value(s) at p, appended: one varint, or a packed run."""
    cdef uint64_t v
    cdef Py_ssize_t s, q
    if wt == 0:
        p = _hvarint(b, p, end, 0, &v)
        if out is not None:
            out.append(<int64_t>v)
        return p
    s = _hlen(b, p, end, wt, &q)
    while s < q:
        s = _varint(b, s, q, &v)
        if s < 0:
            raise _Refused
        if out is not None:
            out.append(<int64_t>v)
    return q


cdef int _hcheck(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int kind, int depth) except -1:
    """Check a message that nothing reads as upb would parse it (`_hfield`'s kinds)."""
    cdef uint64_t fn, v
    cdef int wt, fk, sub
    cdef Py_ssize_t s, q
    cdef set seen = None
    if depth > _H_DEPTH:
        raise _Refused
    while p < end:
        p = _hnext(b, p, end, &fn, &wt)
        fk = _hfield(kind, fn, &sub)
        if fk == 0:
            p = _hskip(b, p, end, wt)
        elif fk == F_V:
            p = _hvarint(b, p, end, wt, &v)
        elif fk == F_VR:
            p = _hvalues(b, p, end, wt, None)
        elif fk == F_S:
            _htext(b, p, end, wt, &p)
        else:
            if fk == F_M:
                if seen is None:
                    seen = set()
                if fn in seen:
                    raise _Refused
                seen.add(fn)
            s = _hlen(b, p, end, wt, &q)
            _hcheck(b, s, q, sub, depth + 1)
            p = q
    return 0


cdef HLayout _NO_LAYOUT = HLayout.__new__(HLayout)
cdef HMeta _NO_META = HMeta.__new__(HMeta)
_NO_META.op_name = ""
cdef HShape _NO_SHAPE = HShape.__new__(HShape)
_NO_SHAPE.dimensions = []
_NO_SHAPE.tuple_shapes = []
_NO_SHAPE.layout = _NO_LAYOUT


cdef HLayout _hlayout(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int depth):
    cdef HLayout out
    cdef uint64_t fn, v
    cdef int wt
    cdef int64_t space = 0
    if depth > _H_DEPTH:
        raise _Refused
    while p < end:
        p = _hnext(b, p, end, &fn, &wt)
        if fn == 1:
            p = _hvalues(b, p, end, wt, None)
        elif fn == 8:
            p = _hvarint(b, p, end, wt, &v)
            space = <int64_t>v
        else:
            p = _hskip(b, p, end, wt)
    if space == 0:
        return _NO_LAYOUT  # (read only: one layout of memory space 0 serves every shape)
    out = HLayout.__new__(HLayout)
    out.memory_space = space
    return out


cdef HShape _hshape(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int depth):
    cdef HShape out = HShape.__new__(HShape)
    cdef uint64_t fn, v
    cdef int wt
    cdef Py_ssize_t s, q
    cdef list tup = None
    if depth > _H_DEPTH:
        raise _Refused
    out.dimensions = []
    out.layout = None
    while p < end:
        p = _hnext(b, p, end, &fn, &wt)
        if fn == 2:
            p = _hvarint(b, p, end, wt, &v)
            out.element_type = _hint32(v)
        elif fn == 3:
            p = _hvalues(b, p, end, wt, out.dimensions)
        elif fn == 4:
            s = _hlen(b, p, end, wt, &q)
            if tup is None:
                tup = []
            tup.append(_hshape(b, s, q, depth + 1))
            p = q
        elif fn == 5:
            if out.layout is not None:
                raise _Refused
            s = _hlen(b, p, end, wt, &q)
            out.layout = _hlayout(b, s, q, depth + 1)
            p = q
        else:
            p = _hskip(b, p, end, wt)
    out.tuple_shapes = tup if tup is not None else []
    if out.layout is None:
        out.layout = _NO_LAYOUT
    return out


cdef HMeta _hmeta(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int depth):
    cdef HMeta out = HMeta.__new__(HMeta)
    cdef uint64_t fn, v
    cdef int wt
    if depth > _H_DEPTH:
        raise _Refused
    out.op_name = ""
    while p < end:
        p = _hnext(b, p, end, &fn, &wt)
        if fn == 1:  # (op_type: nothing reads it; checked as upb checks it)
            _htext(b, p, end, wt, &p)
        elif fn == 2:
            out.op_name = _hstr(b, p, end, wt, &p)
        elif fn == 15:
            p = _hvarint(b, p, end, wt, &v)
            out.stack_frame_id = _hint32(v)
        else:
            p = _hskip(b, p, end, wt)
    return out


cdef list _NO_IDS = []
cdef const uint8_t* _EMPTY_B = <const uint8_t*>b""


cdef HInstr _hinstr(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int depth):
    cdef HInstr out = HInstr.__new__(HInstr)
    cdef uint64_t fn, v
    cdef int wt
    cdef Py_ssize_t s, q
    if depth > _H_DEPTH:
        raise _Refused
    out.name = out.opcode = ""
    out.operand_ids = out.control_predecessor_ids = out.called_computation_ids = None
    while p < end:
        p = _hnext(b, p, end, &fn, &wt)
        if fn == 1:
            out.name = _hstr(b, p, end, wt, &p)
        elif fn == 2:
            out.opcode = _hstr(b, p, end, wt, &p)
        elif fn == 3 or fn == 7:
            s = _hlen(b, p, end, wt, &q)
            if fn == 3:
                if out.shape is not None:
                    raise _Refused
                out.shape = _hshape(b, s, q, depth + 1)
            else:
                if out.metadata is not None:
                    raise _Refused
                out.metadata = _hmeta(b, s, q, depth + 1)
            p = q
        elif fn == 9 or fn == 13 or fn == 35:
            p = _hvarint(b, p, end, wt, &v)
            if fn == 9:
                out.parameter_number = <int64_t>v
            elif fn == 13:
                out.tuple_index = <int64_t>v
            else:
                out.id = <int64_t>v
        elif fn == 36:
            if out.operand_ids is None:
                out.operand_ids = []
            p = _hvalues(b, p, end, wt, out.operand_ids)
        elif fn == 37:
            if out.control_predecessor_ids is None:
                out.control_predecessor_ids = []
            p = _hvalues(b, p, end, wt, out.control_predecessor_ids)
        elif fn == 38:
            if out.called_computation_ids is None:
                out.called_computation_ids = []
            p = _hvalues(b, p, end, wt, out.called_computation_ids)
        else:
            p = _hskip(b, p, end, wt)
    # (absent ones share one empty list: nothing that reads them writes to them)
    if out.operand_ids is None:
        out.operand_ids = _NO_IDS
    if out.control_predecessor_ids is None:
        out.control_predecessor_ids = _NO_IDS
    if out.called_computation_ids is None:
        out.called_computation_ids = _NO_IDS
    if out.shape is None:
        out.shape = _NO_SHAPE
    if out.metadata is None:
        out.metadata = _NO_META
    return out


cdef HComp _hcomp(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int depth):
    cdef HComp out = HComp.__new__(HComp)
    cdef uint64_t fn, v
    cdef int wt
    cdef Py_ssize_t s, q
    if depth > _H_DEPTH:
        raise _Refused
    out.name = ""
    out.instructions = []
    while p < end:
        p = _hnext(b, p, end, &fn, &wt)
        if fn == 1:
            out.name = _hstr(b, p, end, wt, &p)
        elif fn == 2:
            s = _hlen(b, p, end, wt, &q)
            out.instructions.append(_hinstr(b, s, q, depth + 1))
            p = q
        elif fn == 5 or fn == 6 or fn == 7:
            p = _hvarint(b, p, end, wt, &v)
            if fn == 5:
                out.id = <int64_t>v
            elif fn == 6:
                out.root_id = <int64_t>v
        else:
            p = _hskip(b, p, end, wt)
    return out


cdef HFrames _hframes(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int depth):
    cdef HFrames out = HFrames.__new__(HFrames)
    cdef HLoc loc
    cdef HFrame fr
    cdef uint64_t fn, fn2, v
    cdef int wt, wt2
    cdef Py_ssize_t s, q
    cdef int32_t x
    if depth + 1 > _H_DEPTH:
        raise _Refused
    out.file_names, out.function_names = [], []
    out.file_locations, out.stack_frames = [], []
    while p < end:
        p = _hnext(b, p, end, &fn, &wt)
        if fn == 1 or fn == 2:
            (out.file_names if fn == 1 else out.function_names).append(
                _hstr(b, p, end, wt, &p))
        elif fn == 3 or fn == 4:
            s = _hlen(b, p, end, wt, &q)
            p = q
            if fn == 3:
                loc = HLoc.__new__(HLoc)
                out.file_locations.append(loc)
            else:
                fr = HFrame.__new__(HFrame)
                out.stack_frames.append(fr)
            while s < q:
                s = _hnext(b, s, q, &fn2, &wt2)
                if (fn == 3 and 1 <= fn2 <= 6) or (fn == 4 and 1 <= fn2 <= 2):
                    s = _hvarint(b, s, q, wt2, &v)
                    x = _hint32(v)
                    if fn == 4:
                        if fn2 == 1:
                            fr.file_location_id = x
                        else:
                            fr.parent_frame_id = x
                    elif fn2 == 1:
                        loc.file_name_id = x
                    elif fn2 == 2:
                        loc.function_name_id = x
                    elif fn2 == 3:
                        loc.line = x
                    elif fn2 == 4:
                        loc.column = x
                    elif fn2 == 5:
                        loc.end_line = x
                    else:
                        loc.end_column = x
                else:
                    s = _hskip(b, s, q, wt2)
        else:
            p = _hskip(b, p, end, wt)
    return out


cdef HModule _hmodule(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int depth):
    cdef HModule out = HModule.__new__(HModule)
    cdef uint64_t fn, v
    cdef int wt
    cdef Py_ssize_t s, q
    cdef bint schedule = False
    if depth > _H_DEPTH:
        raise _Refused
    out.name = out.entry_computation_name = ""
    out.computations = []
    while p < end:
        p = _hnext(b, p, end, &fn, &wt)
        if fn == 1:
            out.name = _hstr(b, p, end, wt, &p)
        elif fn == 2:
            out.entry_computation_name = _hstr(b, p, end, wt, &p)
        elif fn == 3:
            s = _hlen(b, p, end, wt, &q)
            out.computations.append(_hcomp(b, s, q, depth + 1))
            p = q
        elif fn == 5 or fn == 6:
            p = _hvarint(b, p, end, wt, &v)
            if fn == 5:
                out.id = <int64_t>v
            else:
                out.entry_computation_id = <int64_t>v
        elif fn == 7:
            if schedule:
                raise _Refused
            schedule = True
            s = _hlen(b, p, end, wt, &q)
            _hcheck(b, s, q, K_SCHEDULE, depth + 1)
            p = q
        elif fn == 17:
            if out.stack_frame_index is not None:
                raise _Refused
            s = _hlen(b, p, end, wt, &q)
            out.stack_frame_index = _hframes(b, s, q, depth + 1)
            p = q
        else:
            p = _hskip(b, p, end, wt)
    if out.stack_frame_index is None:
        out.stack_frame_index = HFrames.__new__(HFrames)
        out.stack_frame_index.file_names = []
        out.stack_frame_index.function_names = []
        out.stack_frame_index.file_locations = []
        out.stack_frame_index.stack_frames = []
    return out


cdef HBufLoc _NO_BUFLOC = HBufLoc.__new__(HBufLoc)
_NO_BUFLOC.instruction_name = ""
_NO_BUFLOC.shape_index = []


cdef HBufLoc _hbufloc(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int depth):
    cdef HBufLoc out = HBufLoc.__new__(HBufLoc)
    cdef uint64_t fn, v
    cdef int wt
    if depth > _H_DEPTH:
        raise _Refused
    out.instruction_name = ""
    out.shape_index = []
    while p < end:
        p = _hnext(b, p, end, &fn, &wt)
        if fn == 2:
            out.instruction_name = _hstr(b, p, end, wt, &p)
        elif fn == 3:
            p = _hvalues(b, p, end, wt, out.shape_index)
        elif fn == 4:
            p = _hvarint(b, p, end, wt, &v)
            out.instruction_id = <int64_t>v
        else:
            p = _hskip(b, p, end, wt)
    return out


cdef HLogical _hlogical(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int depth):
    cdef HLogical out = HLogical.__new__(HLogical)
    cdef uint64_t fn, v
    cdef int wt
    cdef Py_ssize_t s, q
    if depth > _H_DEPTH:
        raise _Refused
    while p < end:
        p = _hnext(b, p, end, &fn, &wt)
        if fn == 1 or fn == 2 or fn == 4:
            p = _hvarint(b, p, end, wt, &v)
            if fn == 1:
                out.id = <int64_t>v
            elif fn == 2:
                out.size = <int64_t>v
            else:
                out.color = <int64_t>v
        elif fn == 3:
            if out.defined_at is not None:
                raise _Refused  # (written twice: upb merges them)
            s = _hlen(b, p, end, wt, &q)
            out.defined_at = _hbufloc(b, s, q, depth + 1)
            p = q
        else:
            p = _hskip(b, p, end, wt)
    if out.defined_at is None:
        out.defined_at = _NO_BUFLOC  # (read only, as every default here)
    return out


cdef HEvent _hevent(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int depth):
    cdef HEvent out = HEvent.__new__(HEvent)
    cdef uint64_t fn, v
    cdef int wt
    if depth > _H_DEPTH:
        raise _Refused
    out.instruction_name = ""
    while p < end:
        p = _hnext(b, p, end, &fn, &wt)
        if fn == 1 or fn == 2 or fn == 5:
            p = _hvarint(b, p, end, wt, &v)
            if fn == 1:
                out.kind = _hint32(v)  # (an enum: an int32, open in proto3)
            elif fn == 2:
                out.buffer_id = <int64_t>v
            else:
                out.share_with_canonical_id = <int64_t>v
        elif fn == 3:  # (computation_name: nothing reads it; checked as upb checks it)
            _htext(b, p, end, wt, &p)
        elif fn == 4:
            out.instruction_name = _hstr(b, p, end, wt, &p)
        else:
            p = _hskip(b, p, end, wt)
    return out


cdef HBuffers _hbuffers(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int depth):
    """A buffer assignment's logical buffers and heap-simulator traces (`_hcheck`'s
    K_BUFFERS, K_LOGICAL, K_LOCATION, K_HEAPTRACE and K_EVENT rules, the values kept); its
    allocations checked only."""
    cdef HBuffers out = HBuffers.__new__(HBuffers)
    cdef HTrace tr
    cdef uint64_t fn, fn2, v
    cdef int wt, wt2
    cdef Py_ssize_t s, q, r
    if depth > _H_DEPTH:
        raise _Refused
    out.logical_buffers, out.heap_simulator_traces = [], []
    while p < end:
        p = _hnext(b, p, end, &fn, &wt)
        if fn == 1 or fn == 3 or fn == 4:
            s = _hlen(b, p, end, wt, &q)
            p = q
            if fn == 1:
                out.logical_buffers.append(_hlogical(b, s, q, depth + 1))
            elif fn == 3:
                _hcheck(b, s, q, K_ALLOCATION, depth + 1)
            else:
                if depth + 1 > _H_DEPTH:
                    raise _Refused
                tr = HTrace.__new__(HTrace)
                tr.events = []
                out.heap_simulator_traces.append(tr)
                while s < q:
                    s = _hnext(b, s, q, &fn2, &wt2)
                    if fn2 == 1:
                        s = _hlen(b, s, q, wt2, &r)
                        tr.events.append(_hevent(b, s, r, depth + 2))
                        s = r
                    elif fn2 == 2 or fn2 == 3:
                        s = _hvarint(b, s, q, wt2, &v)
                    else:
                        s = _hskip(b, s, q, wt2)
        else:
            p = _hskip(b, p, end, wt)
    return out


def hlo_lite(data, bint buffers=False):
    """A serialized HloProto as upb would read the fields overlap reads (`HProto`: its
    `hlo_module`, with upb's field names and values; with `buffers`, its buffer assignment's
    logical buffers and heap-simulator traces too), or None where upb must read it (the
    comment above `HLayout`)."""
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* b
    cdef Py_ssize_t p = 0, end = mv.shape[0], s, q
    cdef uint64_t fn
    cdef int wt
    cdef HProto out = HProto.__new__(HProto)
    cdef bint seen_buffers = False
    if end == 0:
        out.hlo_module = _hmodule(_EMPTY_B, 0, 0, 1)
        if buffers:
            out.buffer_assignment = _hbuffers(_EMPTY_B, 0, 0, 1)
        return out
    b = &mv[0]
    try:
        while p < end:
            p = _hnext(b, p, end, &fn, &wt)
            if fn == 1:
                if out.hlo_module is not None:
                    raise _Refused
                s = _hlen(b, p, end, wt, &q)
                out.hlo_module = _hmodule(b, s, q, 1)
                p = q
            elif fn == 3:
                if seen_buffers:
                    raise _Refused
                seen_buffers = True
                s = _hlen(b, p, end, wt, &q)
                if buffers:
                    out.buffer_assignment = _hbuffers(b, s, q, 1)
                else:
                    _hcheck(b, s, q, K_BUFFERS, 1)
                p = q
            else:
                p = _hskip(b, p, end, wt)
        if out.hlo_module is None:
            out.hlo_module = _hmodule(b, 0, 0, 1)
        if buffers and out.buffer_assignment is None:
            out.buffer_assignment = _hbuffers(b, 0, 0, 1)
    except _Refused:
        return None
    return out
