"""``parse(sql) -> Command``: one QUEUE / CACHE / SYS statement (``cubestore-dialect.md``
§3-§5, with cubequeue's §8 rules and issue 9's PURGE and SYS CLOCK).

Speed is a stated requirement (issue 3): Lark's LALR parser runs the
:class:`~cubequeue.grammar.transform.CommandBuilder` callbacks during the parse, so no
tree is built, and :func:`parse_cached` keeps an LRU of statement text → command (commands
are immutable, so sharing them is safe). The lexer is :class:`StatementLexer`, a
contextual lexer with one regex per parser state (``lexer.py``), and :func:`parse` runs
Lark's LALR tables and callbacks over its matches in one loop (``driver.py``) instead of
``Lark.parse``, which gives the same result with more overhead per token.

Start-up (issue 9, "Fast start": accept connections within 1 s): building the LALR tables
from ``queue.lark`` takes 100-250 ms, so the built parser is cached in a file named after
a hash of everything that shapes it (:func:`_cache_files`, :func:`build_lark`); a
missing, unreadable or unwritable cache only means building again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import sys
from pathlib import Path
from typing import Any

import lark
from lark import Lark
from lark.exceptions import UnexpectedInput

from cubequeue.grammar.commands import Command
from cubequeue.grammar.diagnostics import from_lark
from cubequeue.grammar.driver import Driver
from cubequeue.grammar.lexer import StatementLexer
from cubequeue.grammar.lexical import ID_CHAR
from cubequeue.grammar.transform import CommandBuilder

__all__ = ["CACHED_TEXT_LIMIT", "build_lark", "is_dialect", "parse", "parse_cached"]

_GRAMMAR = Path(__file__).with_name("queue.lark")

#: Lark options that shape the parser (the transformer is given separately: Lark does not
#: cache callbacks, it binds them anew on every load).
_OPTIONS: dict[str, Any] = {
    "parser": "lalr",
    "lexer": StatementLexer,
    "maybe_placeholders": False,
    "propagate_positions": False,
}


def _cache_files(grammar: str) -> list[Path]:
    """Where a built parser may be cached, best first.

    The name hashes the grammar, the options, the Lark and Python versions and the lexer
    class (Lark pickles the class by name), so a stale file is never even opened. First
    choice is the package's ``__pycache__`` (like ``.pyc`` files: an image build can
    pre-create it), then the user's cache directory.
    """
    lexer = f"{StatementLexer.__module__}.{StatementLexer.__qualname__}"
    shaped = repr(sorted((k, str(v)) for k, v in _OPTIONS.items()))
    key = f"{grammar}\0{shaped}\0{lexer}\0{lark.__version__}\0{sys.version_info[:2]}"
    name = f"queue.lark.{hashlib.sha256(key.encode()).hexdigest()[:24]}.cache"
    user_cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache"
    )
    return [_GRAMMAR.parent / "__pycache__" / name, Path(user_cache) / "cubequeue" / name]


def build_lark(transformer: CommandBuilder, cache_dirs: list[Path] | None = None) -> Lark:
    """The LALR parser of ``queue.lark``, loaded from the first usable cache file.

    ``cache_dirs`` replaces the default cache directories (tests; ``[]`` disables the
    cache). The file holds ``Lark.save()``'s output and is read back the way Lark's own
    ``cache=`` option reads it (``Lark._load`` with the transformer), but written under a
    temporary name and renamed into place: Lark's option writes the final file in place
    and hashes its own path into the contents, so servers starting side by side could
    read a half-written file, and a file written under a temporary name never matched.
    Any failure to read (absent, unreadable, corrupt) means building it again.
    """
    grammar = _GRAMMAR.read_text(encoding="utf-8")
    files = _cache_files(grammar)
    if cache_dirs is not None:
        files = [directory / files[0].name for directory in cache_dirs]
    for path in files:
        try:
            with open(path, "rb") as f:
                return Lark.__new__(Lark)._load(f, transformer=transformer)
        except Exception:  # any unusable cache file: try the next one, then build
            continue
    built = Lark(grammar, transformer=transformer, **_OPTIONS)
    for path in files:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                built.save(f)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            continue
        break
    return built


_lark = build_lark(CommandBuilder())
_run = Driver(_lark).parse


def parse(sql: str) -> Command:
    """Parse one statement (one trailing ``;`` allowed); raises only ``QueueError``."""
    try:
        command, placeholders = _run(sql)
    except UnexpectedInput as exc:
        raise from_lark(sql, exc) from None
    if placeholders is not None:
        placeholders.finish()
    assert isinstance(command, Command)
    return command


#: Statements longer than this bypass the LRU: a cache of 4096 megabyte payloads would
#: pin gigabytes, and such statements are practically never repeated.
CACHED_TEXT_LIMIT = 16 * 1024


@functools.lru_cache(maxsize=4096)
def _parse_lru(sql: str) -> Command:
    return parse(sql)


def parse_cached(sql: str) -> Command:
    """:func:`parse` behind an LRU keyed by the statement text (errors are not cached)."""
    if len(sql) > CACHED_TEXT_LIMIT:
        return parse(sql)
    return _parse_lru(sql)


_DIALECT_HEAD = re.compile(
    rf"(?:[ \t\r\n\f\v]|--[^\n]*|/\*[\s\S]*?\*/)*+(?i:queue|cache|sys)(?!{ID_CHAR})"
)


def is_dialect(sql: str) -> bool:
    """True when the first token is QUEUE, CACHE or SYS (§1.1), after whitespace/comments."""
    return _DIALECT_HEAD.match(sql) is not None
