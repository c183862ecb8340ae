"""qmem.valueclass behaves as dataclasses does, for every feature qmem uses.

Each class body below is decorated once by ``dataclasses.dataclass`` and once by
``qmem.valueclass.dataclass``; construction (positional, by name, defaults, factories, errors),
``repr``, equality, hashing, frozen assignment, ``__post_init__``, inheritance, ``fields``,
``replace`` and ``asdict`` must agree.
"""

from __future__ import annotations

import dataclasses
import copy
import unittest
from typing import ClassVar

from qmem import valueclass


def make(module):
    """The same classes, built by ``module``'s decorator and field function."""
    dc, field = module.dataclass, module.field

    @dc(frozen=True)
    class Point:
        x: int
        y: int = 0
        label: str = field(default="p", repr=False)
        KIND: ClassVar[str] = "point"

    @dc
    class Bag:
        name: str
        items: list = field(default_factory=list)
        seen: dict = field(default_factory=dict)

        def __post_init__(self) -> None:
            self.size = len(self.items)

    @dc
    class Base:
        a: int
        b: str = "b"

    @dc
    class Child(Base):
        c: float = 1.5

    @dc(eq=False)
    class Identity:
        v: int = 1

    @dc(frozen=True)
    class Outer:
        point: Point
        more: tuple = ()
        table: dict = field(default_factory=dict)

    @dc
    class Empty:
        pass

    return Point, Bag, Base, Child, Identity, Outer, Empty


STD = make(dataclasses)
MINE = make(valueclass)


def attempt(fn):
    try:
        return ("ok", fn())
    except Exception as exc:  # the type and message are what is compared
        return (type(exc).__name__ if not isinstance(exc, AttributeError) else "AttributeError", str(exc)[:0])


class SameAsDataclassesTests(unittest.TestCase):
    def both(self, check) -> None:
        self.assertEqual(check(*MINE), check(*STD))

    def test_construction_and_repr(self) -> None:
        self.both(lambda P, *_: [repr(P(1)), repr(P(1, 2)), repr(P(x=3, y=4, label="q")), repr(P(5, label="z"))])
        self.both(lambda P, *_: [attempt(lambda: P()), attempt(lambda: P(1, 2, "l", 4)),
                                 attempt(lambda: P(1, z=2)), attempt(lambda: P(1, x=2))])
        self.both(lambda P, Bag, Base, Child, *_: [repr(Child(1)), repr(Child(1, "x", 2.0)), repr(Base(a=9))])
        self.both(lambda *cls: [repr(cls[6]()), attempt(lambda: cls[6](1))])

    def test_factories_and_post_init(self) -> None:
        def check(P, Bag, *_):
            one, two = Bag("a"), Bag("b", [1, 2])
            one.items.append(3)
            return [one.items, Bag("c").items, two.size, one.size, repr(two)]
        self.both(check)

    def test_equality_and_hash(self) -> None:
        def check(P, Bag, Base, Child, Identity, Outer, Empty):
            return [P(1) == P(1), P(1) == P(2), P(1, label="a") == P(1, label="b"), hash(P(1)) == hash(P(1)),
                    Bag("a") == Bag("a"), attempt(lambda: hash(Bag("a"))), Base(1) == Child(1),
                    Identity() == Identity(), attempt(lambda: hash(Identity()) > -1), P(1) == (1, 0, "p")]
        self.both(check)

    def test_frozen(self) -> None:
        def check(P, *_):
            p = P(1)
            return [attempt(lambda: setattr(p, "x", 2)), attempt(lambda: setattr(p, "other", 2)),
                    attempt(lambda: delattr(p, "x")), p.x, P.KIND]
        self.both(check)
        with self.assertRaises(AttributeError):
            MINE[0](1).x = 3
        with self.assertRaises(valueclass.FrozenInstanceError):
            MINE[0](1).x = 3

    def test_fields_replace_asdict(self) -> None:
        self.both(lambda P, Bag, Base, Child, *_: [[f.name for f in mod_fields(P)], [f.name for f in mod_fields(Child(1))]])
        self.both(lambda P, *_: [repr(mod_replace(P(1, 2), y=5)), attempt(lambda: mod_replace(P(1), nope=1))])
        self.both(lambda P, Bag, Base, Child, Identity, Outer, Empty: [
            mod_asdict(Outer(P(1), (P(2), 3), {"k": [P(4)]})), mod_asdict(Bag("x", [1]))])
        self.both(lambda P, Bag, *_: [repr(mod_replace(Bag("a", [1]), name="b")), mod_replace(Bag("a", [1, 2])).size])

    def test_mutable_default_and_order_are_refused(self) -> None:
        for module in (dataclasses, valueclass):
            with self.subTest(module=module.__name__):
                with self.assertRaises(ValueError):
                    @module.dataclass
                    class Bad:
                        items: list = []  # noqa: RUF012
                with self.assertRaises(TypeError):
                    @module.dataclass
                    class Order:
                        a: int = 1
                        b: int

    def test_copy(self) -> None:
        p = MINE[0](1, 2)
        self.assertEqual(copy.copy(p), p)
        self.assertEqual(copy.deepcopy(p), p)
        bag = copy.deepcopy(MINE[1]("z", [1]))
        self.assertEqual((bag.items, bag.size), ([1], 1))



def mod_fields(obj):
    return (valueclass if _mine(obj) else dataclasses).fields(obj)


def mod_replace(obj, **changes):
    return (valueclass if _mine(obj) else dataclasses).replace(obj, **changes)


def mod_asdict(obj):
    return (valueclass if _mine(obj) else dataclasses).asdict(obj)


def _mine(obj) -> bool:
    cls = obj if isinstance(obj, type) else type(obj)
    return hasattr(cls, "__value_fields__")


if __name__ == "__main__":
    unittest.main()
