"""Input signatures of a decorated function: which arguments are static, and the key
one call's arguments are cached under.

Like ``jax.jit``, a signature is the pytree structure of the dynamic arguments, each
leaf's shape, dtype and weak type (or Python type), and the values of the static
arguments. Calls with the same signature share one compiled executable.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import jax


def _as_tuple(value: int | str | Iterable[Any] | None) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, int | str):
        return (value,)
    return tuple(value)


def resolve_static(
    fun: Callable[..., Any],
    static_argnums: int | Iterable[int] | None,
    static_argnames: str | Iterable[str] | None,
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Static argument positions and names, each completed from the other through
    ``fun``'s signature, as ``jax.jit`` does.

    Returns:
      ``(argnums, argnames)``, sorted and without duplicates.
    """
    nums = {int(n) for n in _as_tuple(static_argnums)}
    names = {str(n) for n in _as_tuple(static_argnames)}
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return tuple(sorted(nums)), tuple(sorted(names))
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for n in list(nums):
        index = n if n >= 0 else len(positional) + n
        if 0 <= index < len(positional) and params[index].kind != params[index].POSITIONAL_ONLY:
            names.add(positional[index])
    for name in list(names):
        if name in positional:
            nums.add(positional.index(name))
    return tuple(sorted(nums)), tuple(sorted(names))


def _leaf_key(leaf: Any) -> Hashable:
    # jax arrays and tracers: their abstract value (shape, dtype, weak type); the type
    # tells concrete arrays from tracers (a call inside another transformation).
    aval = getattr(leaf, "aval", None)
    if aval is not None:
        return type(leaf), aval
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):  # numpy arrays
        return type(leaf), tuple(leaf.shape), leaf.dtype
    return type(leaf)  # Python scalars and other leaves: traced by type


class Signature:
    """Splits a call's arguments into static and dynamic ones and keys them.

    Args:
      argnums: static positional indices (negative counts from the end).
      argnames: static keyword names.
    """

    def __init__(self, argnums: tuple[int, ...], argnames: tuple[str, ...]) -> None:
        self.argnums = argnums
        self.argnames = frozenset(argnames)

    def static_positions(self, count: int) -> frozenset[int]:
        """The positions of the static arguments in a call of ``count`` positional ones."""
        return frozenset(n if n >= 0 else count + n for n in self.argnums)

    def key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hashable:
        """The cache key of one call.

        Raises:
          TypeError: a static argument that is not hashable (as ``jax.jit``).
        """
        if not self.argnums and not self.argnames:
            leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
            return tree, tuple(map(_leaf_key, leaves))
        static_at = self.static_positions(len(args))
        static = tuple(a for i, a in enumerate(args) if i in static_at)
        static_kw = tuple(sorted((k, v) for k, v in kwargs.items() if k in self.argnames))
        dynamic = tuple(a for i, a in enumerate(args) if i not in static_at)
        dynamic_kw = {k: v for k, v in kwargs.items() if k not in self.argnames}
        leaves, tree = jax.tree_util.tree_flatten((dynamic, dynamic_kw))
        key = (tree, tuple(map(_leaf_key, leaves)), static, static_kw)
        hash(key)
        return key

    def dynamic(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments an AOT-compiled executable takes: static ones dropped."""
        if not self.argnums and not self.argnames:
            return args, kwargs
        static_at = self.static_positions(len(args))
        return (
            tuple(a for i, a in enumerate(args) if i not in static_at),
            {k: v for k, v in kwargs.items() if k not in self.argnames},
        )
