"""Cheaper construction of frozen, slotted dataclasses made on the search path.

A search makes a store row, an anchor and a hit for every result. The
``__init__`` that ``dataclass(frozen=True)`` writes sets each field through
``object.__setattr__`` (frozen classes refuse plain assignment), and that
generic call is several times slower than storing into the slot directly:
for the sixteen fields of a chunk row it costs more than the SQL read of the
row. :func:`fast_init` replaces the generated ``__init__`` with one of the
same signature that stores each argument through its slot's descriptor. The
objects are the same in every respect (fields, equality, hash, repr, frozen
assignment still raises); only the plain cases are accepted — no default
factories, ``__post_init__``, init-only or keyword-only fields.
"""

from __future__ import annotations

import dataclasses
import keyword
from typing import Any, TypeVar

T = TypeVar("T")


def fast_init(cls: type[T]) -> type[T]:
    """Class decorator (above ``@dataclass(frozen=True, slots=True)``): a faster ``__init__``."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__}: fast_init is for frozen dataclasses with slots")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: fast_init does not run __post_init__")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = [f.name for f in fields]
    if len(names) != len(getattr(cls, "__dataclass_fields__", {})):  # init-only pseudo-fields
        raise TypeError(f"{cls.__name__}: fast_init does not support InitVar or ClassVar fields")
    ns: dict[str, Any] = {}
    args, body = [], []
    for f in fields:
        if not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: fast_init supports plain fields only")
        if keyword.iskeyword(f.name) or f.name == "self":
            raise TypeError(f"{cls.__name__}.{f.name}: not usable as a parameter name")
        ns[f"_set_{f.name}"] = cls.__dict__[f.name].__set__  # the slot's member descriptor
        if f.default is dataclasses.MISSING:
            args.append(f.name)
        else:
            ns[f"_default_{f.name}"] = f.default
            args.append(f"{f.name}=_default_{f.name}")
        body.append(f"    _set_{f.name}(self, {f.name})")
    src = f"def __init__(self, {', '.join(args)}) -> None:\n" + "\n".join(body or ["    pass"])
    exec(src, ns)  # the source is built above from the class's own field names
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = dict(getattr(cls.__init__, "__annotations__", {}))
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
