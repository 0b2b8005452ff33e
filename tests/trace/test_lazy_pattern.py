"""`hlotext.LazyPattern`: a module-level pattern compiled where it is first used (issue 32's
start-up), answering as the compiled pattern does."""

from __future__ import annotations

import re

import pytest

from overlap.trace import hlotext
from overlap.trace.hlotext import LazyPattern


def test_compiled_on_first_use_not_at_construction() -> None:
    bad = LazyPattern("(unclosed")  # a module would fail at import if this compiled here
    with pytest.raises(re.error):
        bad.match("x")


@pytest.mark.parametrize("text", ["copy-start.5", "all-reduce-done", "send.2", "fusion.1", ""])
def test_answers_as_the_compiled_pattern(text: str) -> None:
    src, flags = r"^(?P<base>.+)-(?P<role>start|done)(?P<n>\.\d+)?$", re.IGNORECASE
    lazy, eager = LazyPattern(src, flags), re.compile(src, flags)
    for _ in range(2):  # the first read compiles, the second reads the kept attribute
        got, want = lazy.match(text), eager.match(text)
        assert (got and got.groupdict()) == (want and want.groupdict())
        assert lazy.sub("X", text) == eager.sub("X", text)
        assert lazy.findall(text) == eager.findall(text)
    assert (lazy.pattern, lazy.flags, lazy.groups) == (eager.pattern, eager.flags, eager.groups)
    with pytest.raises(AttributeError):
        getattr(lazy, "no_such_method")  # noqa: B009 - the read itself is the test


def test_the_reader_rules_keep_their_answers() -> None:
    assert hlotext.is_async_boundary("copy-start.3") and hlotext.is_async_boundary("recv")
    assert not hlotext.is_async_boundary("fusion.7")
    assert hlotext.shape_bytes("bf16[2,1024]{1,0:S(5)}") == 4096
