"""Value classes: the part of :mod:`dataclasses` qmem uses, at a fraction of its start-up cost.

Why not ``dataclasses``: importing it brings ``inspect`` (and ``ast``, ``dis``, ``tokenize``…),
and each ``@dataclass`` compiles its ``__init__``, ``__repr__``, ``__eq__`` and ``__setattr__``
with ``exec`` when the class is defined.  qmem defines about seventy such classes and a
``find`` process needs a handful of them, so the stdlib's version cost a ``find`` more than
its SQL.  Here only ``__init__`` is compiled, and only when the class is first instantiated;
the other methods are shared functions reading the class's field list.

The promise, for what qmem uses (anything else is refused when the class is defined):

* ``@dataclass`` / ``@dataclass(frozen=..., eq=..., repr=...)`` on a class whose annotations
  are its fields, in order, base value classes' fields first; a field's class attribute is its
  default, or a :func:`field` with ``default``, ``default_factory`` and ``repr``.  A mutable
  default (list, dict, set) is refused, as by ``dataclasses``; so is a field without a default
  after one with.  ``ClassVar`` annotations are not fields.
* ``__init__`` takes the fields positionally or by name, fills defaults and factories, and
  calls ``__post_init__`` when the class has one.
* ``__repr__`` is ``Name(a=1, b='x')`` over the ``repr=True`` fields; ``__eq__`` compares the
  field tuples of two instances of the same class; ``__hash__`` follows ``dataclasses``'
  table (frozen and eq: hash of the fields; eq and not frozen: unhashable; an explicit
  ``__hash__`` in the class body is kept).
* ``frozen=True``: assigning or deleting a field raises :class:`FrozenInstanceError` (an
  ``AttributeError``); ``__init__`` sets fields around it.
* :func:`fields`, :func:`replace` (a new instance through ``__init__``, so ``__post_init__``
  runs) and :func:`asdict` (recursing into value classes, lists, tuples and dicts; other values
  are shared, not deep-copied: qmem's field values are immutable).
"""

from __future__ import annotations

__all__ = ["dataclass", "field", "fields", "replace", "asdict"]

_FIELDS = "__value_fields__"
_MISSING = object()


class FrozenInstanceError(AttributeError):
    """A field of a frozen value class was assigned or deleted."""


class Field:
    """One field: its name, default or default factory, and whether ``repr`` shows it."""

    __slots__ = ("name", "default", "default_factory", "repr")

    def __init__(self, default: object = _MISSING, default_factory: object = _MISSING, repr: bool = True) -> None:
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.default = default
        self.default_factory = default_factory
        self.repr = repr

    def __repr__(self) -> str:
        return f"Field(name={self.name!r})"


def field(*, default: object = _MISSING, default_factory: object = _MISSING, repr: bool = True) -> object:
    """A field with a default, a default factory (called for each instance) or hidden from repr."""
    return Field(default, default_factory, repr)


def fields(obj: object) -> tuple[Field, ...]:
    """The fields of a value class or of an instance, in order."""
    try:
        return getattr(obj, _FIELDS)
    except AttributeError:
        raise TypeError("must be called with a value class or an instance of one") from None


def replace(obj: object, /, **changes: object) -> object:
    """A new instance of ``obj``'s class with ``changes`` applied to its fields."""
    values = {f.name: getattr(obj, f.name) for f in fields(obj)}
    unknown = set(changes) - set(values)
    if unknown:
        raise TypeError(f"{type(obj).__qualname__} has no field {sorted(unknown)[0]!r}")
    values.update(changes)
    return type(obj)(**values)


def asdict(obj: object) -> dict[str, object]:
    """The fields of an instance as a dict, value classes inside turned into dicts too."""
    fields(obj)
    return _plain(obj)  # type: ignore[return-value]


def _plain(value: object) -> object:
    if hasattr(type(value), _FIELDS):
        return {f.name: _plain(getattr(value, f.name)) for f in getattr(value, _FIELDS)}
    if isinstance(value, (list, tuple)):
        items = [_plain(item) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return type(value)((_plain(k), _plain(v)) for k, v in value.items())
    return value


def dataclass(cls: type | None = None, /, *, frozen: bool = False, eq: bool = True, repr: bool = True):  # noqa: A002
    """Make ``cls`` a value class; see the module docstring."""
    def wrap(klass: type) -> type:
        return _build(klass, frozen=frozen, eq=eq, with_repr=repr)
    return wrap if cls is None else wrap(cls)


def _is_classvar(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__origin__", annotation)
    text = text if isinstance(text, str) else repr(text)
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _build(cls: type, *, frozen: bool, eq: bool, with_repr: bool) -> type:
    inherited: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in getattr(base, _FIELDS, ()) if _FIELDS in base.__dict__ else ():
            inherited[f.name] = f
    own = cls.__dict__.get("__annotations__", {})
    for name, annotation in own.items():
        if _is_classvar(annotation):
            continue
        value = cls.__dict__.get(name, _MISSING)
        f = value if isinstance(value, Field) else Field(default=value)
        if f.default is not _MISSING and type(f.default).__hash__ is None:  # as dataclasses judges it
            raise ValueError(f"mutable default {type(f.default).__name__} for field {name} is not allowed: "
                             "use default_factory")
        f.name = name
        if isinstance(value, Field):
            if f.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        inherited[name] = f
    ordered = tuple(inherited.values())
    seen_default = False
    for f in ordered:
        has_default = f.default is not _MISSING or f.default_factory is not _MISSING
        if seen_default and not has_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        seen_default = seen_default or has_default
    setattr(cls, _FIELDS, ordered)
    cls.__value_frozen__ = frozen  # type: ignore[attr-defined]
    if "__init__" not in cls.__dict__:
        cls.__init__ = _first_init  # type: ignore[misc]
    if with_repr and "__repr__" not in cls.__dict__:
        cls.__repr__ = _repr  # type: ignore[assignment]
    if eq and "__eq__" not in cls.__dict__:
        cls.__eq__ = _eq  # type: ignore[assignment]
    class_hash = cls.__dict__.get("__hash__", _MISSING)  # a body with __eq__ gets __hash__ = None implicitly
    explicit_hash = not (class_hash is _MISSING or (class_hash is None and "__eq__" in cls.__dict__))
    if eq and not explicit_hash:
        cls.__hash__ = _hash if frozen else None  # type: ignore[assignment]
    if frozen:
        cls.__setattr__ = _frozen_setattr  # type: ignore[assignment]
        cls.__delattr__ = _frozen_delattr  # type: ignore[assignment]
    return cls


def _first_init(self: object, *args: object, **kwargs: object) -> None:
    """Compile the class's own ``__init__`` on its first instance, install it, and run it."""
    cls = type(self)
    owner = next(klass for klass in cls.__mro__ if klass.__dict__.get("__init__") is _first_init)
    init = _compile_init(owner)
    owner.__init__ = init  # type: ignore[misc]
    init(self, *args, **kwargs)


def _compile_init(cls: type) -> object:
    flds: tuple[Field, ...] = getattr(cls, _FIELDS)
    frozen = cls.__dict__.get("__value_frozen__", False)
    params, body = [], []
    namespace: dict[str, object] = {"_MISSING": _MISSING, "_object_setattr": object.__setattr__}
    for i, f in enumerate(flds):
        if f.default_factory is not _MISSING:
            namespace[f"_factory_{i}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            value = f"_factory_{i}() if {f.name} is _MISSING else {f.name}"
        elif f.default is not _MISSING:
            namespace[f"_default_{i}"] = f.default
            params.append(f"{f.name}=_default_{i}")
            value = f.name
        else:
            params.append(f.name)
            value = f.name
        body.append(f"_object_setattr(self, {f.name!r}, {value})" if frozen else f"self.{f.name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    signature = ", ".join(["self", *params])
    source = f"def __init__({signature}):\n" + "".join(f"    {line}\n" for line in body or ["pass"])
    exec(source, namespace)  # noqa: S102 - the source is built above from field names only
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"  # type: ignore[attr-defined]
    return init


def _values(self: object) -> tuple[object, ...]:
    return tuple(getattr(self, f.name) for f in getattr(self, _FIELDS))


def _repr(self: object) -> str:
    shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in getattr(self, _FIELDS) if f.repr)
    return f"{type(self).__qualname__}({shown})"


def _eq(self: object, other: object) -> bool:
    if other.__class__ is self.__class__:
        return _values(self) == _values(other)
    return NotImplemented  # type: ignore[return-value]


def _hash(self: object) -> int:
    return hash(_values(self))


def _frozen_setattr(self: object, name: str, value: object) -> None:
    if type(self).__dict__.get("__value_frozen__", False) or name in {f.name for f in getattr(self, _FIELDS)}:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _frozen_delattr(self: object, name: str) -> None:
    if type(self).__dict__.get("__value_frozen__", False) or name in {f.name for f in getattr(self, _FIELDS)}:
        raise FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)
