"""``${...}`` interpolation in YAML strings.

A string that is exactly one ``${expr}`` takes the expression's value and type
(``count: ${num_actors}`` is an int); a string with text around ``${...}`` stays a
string with each value formatted in. ``$${`` writes a literal ``${``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from topo.syntax import expr


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed string: literal text pieces and expressions, alternating."""

    parts: tuple[str | tuple[str], ...]  # str = literal text, (expr,) = expression

    @property
    def whole(self) -> str | None:
        """The expression if the string is exactly one ``${expr}``, else None."""
        if len(self.parts) == 1 and isinstance(self.parts[0], tuple):
            return self.parts[0][0]
        return None

    @property
    def expressions(self) -> list[str]:
        """Every expression in the string."""
        return [p[0] for p in self.parts if isinstance(p, tuple)]


@lru_cache(maxsize=8192)
def parse(text: str) -> Template:
    """Split ``text`` into literal pieces and ``${...}`` expressions; ExprError if unclosed."""
    parts: list[str | tuple[str]] = []
    buf: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("$${", i):
            buf.append("${")
            i += 3
        elif text.startswith("${", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text[j] == "{":
                    depth += 1
                elif text[j] == "}":
                    depth -= 1
                j += 1
            if depth:
                raise expr.ExprError(f"'{text}': '${{' is never closed by '}}'")
            source = text[i + 2 : j - 1]
            if not source.strip():
                raise expr.ExprError(f"'{text}': empty '${{}}'")
            expr.parse(source)
            if buf:
                parts.append("".join(buf))
                buf = []
            parts.append((source,))
            i = j
        else:
            buf.append(text[i])
            i += 1
    if buf:
        parts.append("".join(buf))
    return Template(tuple(parts))


def has_interpolation(text: str) -> bool:
    """Whether ``text`` contains ``${`` (escaped or not) and so needs :func:`render`."""
    return "${" in text


def render(text: str, scope: Mapping[str, Any]) -> Any:
    """Interpolate ``text`` with ``scope``; typed value for a whole ``${expr}``."""
    template = parse(text)
    whole = template.whole
    if whole is not None:
        return expr.evaluate(whole, scope)
    out = []
    for part in template.parts:
        if isinstance(part, tuple):
            value = expr.evaluate(part[0], scope)
            out.append(format_value(value))
        else:
            out.append(part)
    return "".join(out)


def format_value(value: Any) -> str:
    """How a value reads inside a string: YAML-ish for None and booleans."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
