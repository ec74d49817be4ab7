"""``parse(sql) -> Command``: one QUEUE / CACHE / SYS statement (``docs/dialect.md``
§3-§5, with cubequeue's §8 rules).

Lark's LALR parser, through its public API: ``Lark(parser="lalr", lexer=DialectLexer,
transformer=CommandBuilder())``. The builder's callbacks run during the parse, so no tree
is built. Lark's exceptions become one 42601 error here (``diagnostics.py``) and never
leave the package. Repeated statements go through the shape-keyed cache of
``shapes.py``.

Start-up: building the LALR tables from ``queue.lark`` is a noticeable part of a start
(bench/RESULTS-notes.md), so the built parser is cached with Lark's own ``cache=`` option, in a file named after a hash of
everything that shapes it (:func:`_cache_files`). Lark checks the file's hash line and
rebuilds when it does not match or cannot be read (a half-written file fails its pickle
and is rebuilt too), so a missing, unreadable or stale cache only means building again.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any

import lark
from lark import Lark
from lark.exceptions import UnexpectedInput

from cubequeue.grammar.commands import Command, Param
from cubequeue.grammar.diagnostics import from_lark
from cubequeue.grammar.errors import SyntaxError
from cubequeue.grammar.lexer import DialectLexer, ShapeText
from cubequeue.grammar.tokens import first_word
from cubequeue.grammar.transform import CommandBuilder

__all__ = ["build_lark", "is_dialect", "parse", "parse_template"]

_GRAMMAR = Path(__file__).with_name("queue.lark")

#: Lark options that shape the parser (the transformer is given separately: Lark does not
#: cache callbacks, it binds them anew on every load).
_OPTIONS: dict[str, Any] = {
    "parser": "lalr",
    "lexer": DialectLexer,
    "maybe_placeholders": False,
    "propagate_positions": False,
}


def _cache_files(grammar: str) -> list[Path]:
    """Where a built parser may be cached, best first.

    The name hashes the grammar, the options, the Lark and Python versions and the lexer
    class, so a stale file is never even opened. First choice is the package's
    ``__pycache__`` (like ``.pyc`` files: an image build can pre-create it), then the
    user's cache directory.
    """
    lexer = f"{DialectLexer.__module__}.{DialectLexer.__qualname__}"
    shaped = repr(sorted((k, str(v)) for k, v in _OPTIONS.items()))
    key = f"{grammar}\0{shaped}\0{lexer}\0{lark.__version__}\0{sys.version_info[:2]}"
    name = f"queue.lark.{hashlib.sha256(key.encode()).hexdigest()[:24]}.cache"
    user_cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache"
    )
    return [_GRAMMAR.parent / "__pycache__" / name, Path(user_cache) / "cubequeue" / name]


def _usable(path: Path) -> bool:
    """An existing cache file, or one this process may create. A directory this process
    may not search (another user's ``~/.cache`` under an inherited ``HOME``) is unusable,
    not an error: the parser is built instead."""
    try:
        if path.is_file():
            return os.access(path, os.R_OK | os.W_OK)
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path.parent, os.W_OK)


def build_lark(transformer: CommandBuilder, cache_dirs: list[Path] | None = None) -> Lark:
    """The LALR parser of ``queue.lark``, cached in the first usable cache file.

    ``cache_dirs`` replaces the default cache directories (tests; ``[]`` disables the
    cache).
    """
    grammar = _GRAMMAR.read_text(encoding="utf-8")
    files = _cache_files(grammar)
    if cache_dirs is not None:
        files = [directory / files[0].name for directory in cache_dirs]
    cache: str | bool = next((str(path) for path in files if _usable(path)), False)
    return Lark(grammar, transformer=transformer, cache=cache, **_OPTIONS)


_lark = build_lark(CommandBuilder())
_run = _lark.parse


def _check_numbering(command: Command) -> None:
    """``$1…$n`` may not leave a gap (§8 rule 5; PostgreSQL says the same)."""
    indexes = {
        value.index
        for value in (getattr(command, f) for f in command.__dataclass_fields__)
        if isinstance(value, Param)
    }
    if indexes and len(indexes) != max(indexes):
        missing = next(i for i in range(1, len(indexes) + 2) if i not in indexes)
        raise SyntaxError(f"could not determine data type of parameter ${missing}")


def parse(sql: str) -> Command:
    """Parse one statement (one trailing ``;`` allowed); raises only ``QueueError``."""
    try:
        command = _run(sql)
    except UnexpectedInput as exc:
        raise from_lark(sql, exc) from None
    assert isinstance(command, Command)
    if "$" in sql:  # only $n numbering can leave a gap; most statements have no "$"
        _check_numbering(command)
    return command


def parse_template(sql: str) -> Command:
    """``sql`` parsed with its literals as holes (``templates.py``); raises as :func:`parse`
    (the caller parses the text itself to word an error exactly)."""
    return parse(ShapeText(sql))


def is_dialect(sql: str) -> bool:
    """True when the first token is QUEUE, CACHE or SYS (§1.1), after whitespace/comments."""
    return first_word(sql) in ("queue", "cache", "sys")
