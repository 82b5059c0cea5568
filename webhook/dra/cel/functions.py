"""Every function and operator a selector can call, by the name cel-python's parser gives it.

cel-python's own functions (conversions, timestamps and durations) underneath, and in front of
them the ones this package defines where Kubernetes' environment or cel-go's semantics differ:
the standard operators, the strings and regex extensions, and Kubernetes' libraries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from celpy.evaluation import Result, base_functions

from webhook.dra.cel import library, standard, strings

TABLE: Final[Mapping[str, Callable[..., Result]]] = {
    **base_functions,
    **standard.FUNCTIONS,
    **strings.FUNCTIONS,
    **library.FUNCTIONS,
}
