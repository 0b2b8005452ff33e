"""XSpace bytes written by hand, for tests that feed the compiled scanner what the canonical
writers never write but a valid file may (over-long varints, groups, any field order).

Shared by tests/trace/test_scanner.py and tests/trace/test_meta_table.py: one encoder of
varints, fields and XStat values, so that both test the scanner against upb on the same bytes.
"""

from __future__ import annotations

import struct

from hypothesis import strategies as st

from overlap.trace import wire


def varint(v: int, pad: int = 0) -> bytes:
    """`v` (an int64 as its 10-byte form when negative), over-long by `pad` bytes when it
    fits: a value padded with 0x80 continuation bytes still decodes to it."""
    b = bytearray(wire._enc_varint(v & ((1 << 64) - 1)))
    if pad and len(b) + pad <= 10:
        b[-1] |= 0x80
        b += b"\x80" * (pad - 1) + b"\x00"
    return bytes(b)


def field(fn: int, wt: int, payload, pad: int = 0) -> bytes:
    """Field `fn` of wire type `wt`: a varint, fixed bytes (1, 5), a group (3: `payload` is its
    fields) or length-delimited bytes (2)."""
    tag = varint(fn << 3 | wt)
    if wt == 0:
        return tag + varint(payload, pad)
    if wt in (1, 5):
        return tag + payload
    if wt == 3:  # a group: payload is its fields
        return tag + payload + varint(fn << 3 | 4)
    return tag + varint(len(payload), pad) + payload


def stat_values(text_max: int, ref_values: list[int]):
    """XStat values as (field number, value), or None for a stat with no value."""
    text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=text_max)
    return st.one_of(
        st.none(),
        st.tuples(st.just(2), st.floats(allow_nan=False)),
        st.tuples(st.just(3), st.integers(0, (1 << 64) - 1)),
        st.tuples(st.just(4), st.integers(-(1 << 63), (1 << 63) - 1)),
        st.tuples(st.just(5), text),
        st.tuples(st.just(6), st.binary(max_size=6)),
        st.tuples(st.just(7), st.sampled_from(ref_values)),
    )


def stat_value_bytes(val: tuple[int, object] | None, pad: int = 0) -> bytes:
    """The value field of an XStat (`val` as `stat_values` draws it); empty for None."""
    if val is None:
        return b""
    k, x = val
    if k == 2:
        return field(2, 1, struct.pack("<d", x))
    if k in (3, 4, 7):
        return field(k, 0, x, pad)
    if k == 5:
        assert isinstance(x, str)
        return field(5, 2, x.encode(), pad)
    return field(6, 2, x, pad)


def split_planes(buf, n: int, strip=None):
    """`_scan.split_space` with each plane's parts side by side, as tests read them:
    (skeleton, per plane ((first line, end line), entry starts, entry ends, stripped, bad,
    meta), the lines `_LineRecs.taken` gives). The spans are slices of the split's blocks."""
    from overlap.trace import wire

    skel, planes, lines, (ms, me), (lb, eb), _, _ = wire._scan.split_space(buf, n, strip)
    out = [((int(lb[i]), int(lb[i + 1])), ms[eb[i]:eb[i + 1]], me[eb[i]:eb[i + 1]], *got[:3])
           for i, got in enumerate(planes)]
    return skel, out, lines
