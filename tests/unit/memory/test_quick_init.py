"""Frozen records with the faster `__init__` (`memory.quick_init`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from memory.quick_init import quick_init
from memory.records import Memory


@quick_init
@dataclass(frozen=True, slots=True)
class _Checked:
    low: int
    high: int = 10

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError("low above high")


def test_it_takes_the_dataclass_s_arguments_and_stays_frozen() -> None:
    assert _Checked(1) == _Checked(low=1, high=10) == _Checked(1, 10)
    assert dataclasses.replace(_Checked(1), high=5) == _Checked(1, 5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        _Checked(1).low = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        _Checked()  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="low above high"):  # __post_init__ still runs
        _Checked(11)


def test_a_memory_built_so_equals_and_hashes_as_before() -> None:
    values = {f.name: f"v{i}" for i, f in enumerate(dataclasses.fields(Memory))}
    memory = Memory(**values)  # type: ignore[arg-type]
    assert dataclasses.astuple(memory) == tuple(values.values())
    assert hash(memory) == hash(Memory(*values.values()))  # type: ignore[arg-type]


def test_only_frozen_slotted_dataclasses_with_plain_fields() -> None:
    @dataclass(frozen=True)
    class NoSlots:
        x: int

    @dataclass(slots=True)
    class NotFrozen:
        x: int

    @dataclass(frozen=True, slots=True)
    class Factory:
        x: list[int] = field(default_factory=list)

    for cls in (NoSlots, NotFrozen, Factory):
        with pytest.raises(TypeError):
            quick_init(cls)
