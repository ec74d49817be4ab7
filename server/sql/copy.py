"""``COPY (SELECT …) TO STDOUT`` and ``COPY table [(columns)] TO STDOUT``: the statement,
and its rows in COPY's text and CSV formats.

psql's ``\\copy (SELECT …) TO STDOUT`` and ``\\copy (…) TO 'file'`` both send
``COPY (…) TO STDOUT`` and write what comes back (``\\copy system.queue TO 'q.csv' CSV
HEADER`` sends ``COPY  system.queue TO STDOUT CSV HEADER``, a column list as
``system.queue ( id, status )``, checked with psql 15); psycopg's ``cursor.copy()`` sends
it as given. A table is copied as PostgreSQL copies one, as ``SELECT *`` (or its listed
columns) of it. The forms read here are PostgreSQL 15's (docs: "COPY"): the new option list
``WITH (FORMAT csv, HEADER, DELIMITER ',', NULL '', QUOTE '"', ESCAPE '"')`` and the
pre-9.0 words ``WITH CSV HEADER``, ``DELIMITER 'x'``, ``NULL 'x'``. COPY FROM is 0A000
with a hint (cubequeue has no tables to load into).

Rows are formatted as PostgreSQL's ``CopyTo`` does: each value as its text output (the
wire's own text dumpers, so a timestamptz reads as in a SELECT, in the session's
TimeZone), then

* text: ``\\N`` for NULL; backslash, newline, carriage return, tab and the delimiter
  backslash-escaped;
* CSV: NULL as the null string (empty by default, unquoted); a value quoted when it
  contains the delimiter, the quote, CR or LF, or equals the null string, with quotes
  doubled (the escape character).

Pure: :func:`parse_copy` reads the statement, :func:`copy_lines` formats a result; the
wire sends CopyOutResponse, one CopyData per line, CopyDone and ``COPY n``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, tzinfo
from typing import Final, Literal

from cubequeue.grammar.errors import FeatureNotSupported, InvalidParameterValue
from cubequeue.grammar.errors import SyntaxError as SqlSyntaxError
from cubequeue.grammar.results import ResultSet
from cubequeue.server.pgtypes.adapters import dump_value
from cubequeue.storage.system_schemas import SYSTEM_TABLES

from .errors import DuplicateColumn, UndefinedTable
from .lexer import Token, tokenize
from .outcome import HINT, PlainOutcome

__all__ = ["COPY_HINT", "CopyOptions", "CopyOut", "CopyRequest", "copy_lines", "parse_copy",
           "run_copy"]

COPY_HINT: Final = (
    "cubequeue answers COPY (SELECT …) TO STDOUT and COPY system.<table> [(columns)] TO "
    "STDOUT [WITH (FORMAT text|csv, HEADER, DELIMITER, NULL, QUOTE, ESCAPE)], e.g. COPY "
    "system.queue TO STDOUT WITH (FORMAT csv, HEADER); psql: \\copy system.queue TO 'file' "
    "CSV HEADER"
)


@dataclass(frozen=True, slots=True)
class CopyOptions:
    format: Literal["text", "csv"] = "text"
    header: bool = False
    delimiter: str = "\t"
    null: str = "\\N"
    quote: str = '"'
    escape: str = '"'


@dataclass(frozen=True, slots=True)
class CopyRequest:
    #: the query between the parentheses, to run as any SELECT is
    query: str
    options: CopyOptions


def _refuse(what: str) -> FeatureNotSupported:
    return FeatureNotSupported(f"cubequeue does not support {what}", hint=COPY_HINT)


def _syntax(sql: str, tok: Token | None) -> SqlSyntaxError:
    if tok is None:
        return SqlSyntaxError("syntax error at end of input", position=len(sql) + 1)
    return SqlSyntaxError(f'syntax error at or near "{tok.value}"', position=tok.pos + 1)


def _closing(tokens: list[Token], start: int) -> int:
    """The index of the ``)`` matching the ``(`` at ``start``, or -1."""
    depth = 0
    for i in range(start, len(tokens)):
        t = tokens[i]
        if t.kind == "op" and t.value == "(":
            depth += 1
        elif t.kind == "op" and t.value == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _is(tok: Token | None, *words: str) -> bool:
    return tok is not None and tok.kind in ("word", "op") and tok.value in words


def _option_value(tokens: list[Token], i: int, sql: str) -> tuple[str | None, int]:
    """The value after an option name (a string, word or number), or None when the
    option stands alone (``HEADER``)."""
    tok = tokens[i] if i < len(tokens) else None
    if tok is None or _is(tok, ",", ")"):
        return None, i
    if tok.kind in ("string", "word", "number", "ident"):
        return tok.value, i + 1
    raise _syntax(sql, tok)


def _bool(name: str, value: str | None) -> bool:
    if value is None:
        return True
    v = value.lower()
    if v in ("true", "on", "1"):
        return True
    if v in ("false", "off", "0"):
        return False
    raise InvalidParameterValue(f"{name} requires a Boolean value")


def _one_char(name: str, value: str | None) -> str:
    if value is None or len(value) != 1:
        raise InvalidParameterValue(f"COPY {name} must be a single one-byte character")
    return value


def _options(pairs: Sequence[tuple[str, str | None]]) -> CopyOptions:
    seen: set[str] = set()
    values: dict[str, str | None] = {}
    for name, value in pairs:
        if name in seen:
            raise SqlSyntaxError("conflicting or redundant options")
        seen.add(name)
        values[name] = value
    fmt = (values.get("format") or "text").lower() if "format" in values else "text"
    if fmt == "binary":
        raise _refuse("COPY in binary format")
    if fmt not in ("text", "csv"):
        raise InvalidParameterValue(f'COPY format "{fmt}" not recognized')
    unknown = seen - {"format", "header", "delimiter", "null", "quote", "escape", "encoding"}
    if unknown:
        raise SqlSyntaxError(f'option "{sorted(unknown)[0]}" not recognized')
    csv = fmt == "csv"
    if not csv and ({"quote", "escape"} & seen):
        raise FeatureNotSupported("COPY quote and escape are available only in CSV mode")
    if "encoding" in values and (values["encoding"] or "").upper().replace("-", "") != "UTF8":
        raise _refuse(f"COPY in encoding {values['encoding']} (the server's is UTF8)")
    delimiter = _one_char("delimiter", values["delimiter"]) if "delimiter" in values else (
        "," if csv else "\t")
    null = values.get("null", "" if csv else "\\N")
    if null is None:
        raise InvalidParameterValue("NULL requires a parameter")
    quote = _one_char("quote", values["quote"]) if "quote" in values else '"'
    escape = _one_char("escape", values["escape"]) if "escape" in values else quote
    if csv and delimiter == quote:
        raise InvalidParameterValue("COPY delimiter and quote must be different")
    if delimiter in ("\r", "\n", "\\") or (not csv and delimiter in "abcdefghijklmnopqrstuvwxyz0123456789."):
        raise InvalidParameterValue("COPY delimiter cannot be newline, carriage return or \\")
    return CopyOptions("csv" if csv else "text", _bool("header", values.get("header"))
                       if "header" in values else False, delimiter, null, quote, escape)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table_query(tokens: list[Token], sql: str) -> tuple[str, int]:
    """``COPY [schema.]table [(column, …)]`` as the query it copies, and the index of the
    token after it. PostgreSQL copies a table as ``SELECT *`` (or the listed columns) in
    the table's column order; a table named without a schema is looked up in ``system``
    (on the search path, as psql's ``\\d queue`` finds it), so the SELECT decides what
    exists (42P01 for ``system.nope``, the pre-aggregation refusal for another schema)."""
    parts: list[str] = []
    i = 1
    while True:
        tok = tokens[i] if i < len(tokens) else None
        if tok is None or tok.kind not in ("word", "ident") or (
                tok.kind == "word" and tok.value in ("to", "from")):
            raise _syntax(sql, tok)
        parts.append(tok.value)
        i += 1
        if len(parts) == 3 or not _is(tokens[i] if i < len(tokens) else None, "."):
            break
        i += 1
    if len(parts) == 1 and parts[0] in SYSTEM_TABLES:
        parts.insert(0, "system")
    columns = "*"
    if _is(tokens[i] if i < len(tokens) else None, "("):
        close = _closing(tokens, i)
        if close < 0:
            raise _syntax(sql, None)
        names: list[str] = []
        for j in range(i + 1, close):
            tok = tokens[j]
            want_name = (j - i) % 2 == 1
            if want_name and tok.kind in ("word", "ident"):
                if tok.value in names:
                    raise DuplicateColumn(f'column "{tok.value}" specified more than once',
                                          position=tok.pos + 1)
                names.append(tok.value)
            elif want_name or not _is(tok, ","):
                raise _syntax(sql, tok)
        if not names or (close - i) % 2 == 1:
            raise _syntax(sql, tokens[close])
        columns = ", ".join(_quoted(n) for n in names)
        i = close + 1
    if len(parts) == 1 and not _is(tokens[i] if i < len(tokens) else None, "from"):
        raise UndefinedTable(f'relation "{parts[0]}" does not exist', hint=HINT,
                             position=tokens[1].pos + 1)
    return f"SELECT {columns} FROM {'.'.join(_quoted(p) for p in parts)}", i


def parse_copy(sql: str) -> CopyRequest:
    """Read ``COPY (query) TO STDOUT [options]`` or ``COPY table [(columns)] TO STDOUT
    [options]``; every other COPY is 0A000 or 42601."""
    tokens = tokenize(sql)
    if not tokens or not _is(tokens[0], "copy"):
        raise _syntax(sql, tokens[0] if tokens else None)
    if len(tokens) < 2 or not _is(tokens[1], "("):
        query, i = _table_query(tokens, sql)
    else:
        end = _closing(tokens, 1)
        if end < 0:
            raise _syntax(sql, None)
        query = sql[tokens[2].pos : tokens[end].pos] if end > 2 else ""
        if not query.strip():
            raise _syntax(sql, tokens[end])
        i = end + 1
    tok = tokens[i] if i < len(tokens) else None
    if not _is(tok, "to"):
        if tok is not None and _is(tok, "from"):
            target = "(query)" if _is(tokens[1], "(") else sql[tokens[1].pos : tok.pos].strip()
            raise _refuse(f"COPY {target} FROM (cubequeue has no tables to load)")
        raise _syntax(sql, tok)
    i += 1
    tok = tokens[i] if i < len(tokens) else None
    if not _is(tok, "stdout"):
        if tok is not None and tok.kind == "string":
            raise _refuse("COPY TO a server file; use psql's \\copy … TO 'file', which "
                          "writes on the client")
        if _is(tok, "program"):
            raise _refuse("COPY TO PROGRAM")
        raise _syntax(sql, tok)
    i += 1
    pairs: list[tuple[str, str | None]] = []
    if _is(tokens[i] if i < len(tokens) else None, "with"):
        i += 1
    if i < len(tokens) and _is(tokens[i], "("):
        close = _closing(tokens, i)
        if close < 0:
            raise _syntax(sql, None)
        j = i + 1
        while j < close:
            name_tok = tokens[j]
            if name_tok.kind not in ("word", "ident"):
                raise _syntax(sql, name_tok)
            value, j = _option_value(tokens, j + 1, sql)
            pairs.append((name_tok.value.lower(), value))
            if j < close and not _is(tokens[j], ","):
                raise _syntax(sql, tokens[j])
            j += 1
        i = close + 1
    else:  # the pre-9.0 option words
        while i < len(tokens):
            tok = tokens[i]
            if _is(tok, "csv", "binary"):
                pairs.append(("format", tok.value))
                i += 1
            elif _is(tok, "header"):
                pairs.append(("header", None))
                i += 1
            elif _is(tok, "delimiter", "null", "quote", "escape", "encoding"):
                i += 1
                if _is(tokens[i] if i < len(tokens) else None, "as"):
                    i += 1
                if i >= len(tokens) or tokens[i].kind != "string":
                    raise _syntax(sql, tokens[i] if i < len(tokens) else None)
                pairs.append((tok.value, tokens[i].value))
                i += 1
            else:
                raise _syntax(sql, tok)
    if i < len(tokens):
        raise _syntax(sql, tokens[i])
    return CopyRequest(query.strip(), _options(pairs))


def _text_value(value: str, delimiter: str) -> str:
    out = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    out = out.replace("\t", "\\t")
    if delimiter != "\t":
        out = out.replace(delimiter, "\\" + delimiter)
    return out


def _csv_value(value: str, opts: CopyOptions) -> str:
    needs = (value == opts.null or opts.delimiter in value or opts.quote in value
             or "\n" in value or "\r" in value)
    if not needs:
        return value
    if opts.escape != opts.quote:
        value = value.replace(opts.escape, opts.escape * 2)
    return opts.quote + value.replace(opts.quote, opts.escape + opts.quote) + opts.quote


def _header_value(name: str, opts: CopyOptions) -> str:
    return _csv_value(name, opts) if opts.format == "csv" else _text_value(name, opts.delimiter)


def copy_lines(result: ResultSet, type_oids: Sequence[int], opts: CopyOptions,
               tz: tzinfo = UTC) -> list[bytes]:
    """One CopyData payload per row (the header first when asked), each ending in LF."""
    lines: list[bytes] = []
    if opts.header:
        line = opts.delimiter.join(_header_value(c.name, opts) for c in result.columns)
        lines.append(line.encode("utf-8") + b"\n")
    csv = opts.format == "csv"
    for row in result.rows:
        fields = []
        for value, oid in zip(row, type_oids, strict=True):
            if value is None:
                fields.append(opts.null)
                continue
            text = dump_value(oid, 0, value, tz).decode("utf-8")
            fields.append(_csv_value(text, opts) if csv else _text_value(text, opts.delimiter))
        lines.append(opts.delimiter.join(fields).encode("utf-8") + b"\n")
    return lines


@dataclass(frozen=True, slots=True)
class CopyOut:
    """What the wire sends for one COPY TO STDOUT: CopyOutResponse with ``column_count``
    text columns, one CopyData per line, CopyDone, then CommandComplete ``tag``."""

    column_count: int
    lines: list[bytes]
    rows: int

    @property
    def tag(self) -> str:
        return f"COPY {self.rows}"


def run_copy(sql: str, run_select: Callable[[str], PlainOutcome], tz: tzinfo = UTC) -> CopyOut:
    """Answer ``COPY (query) TO STDOUT``: ``run_select`` runs the query as the wire runs
    any plain SELECT (system tables, catalogs, the transaction checks)."""
    request = parse_copy(sql)
    outcome = run_select(request.query)
    result = outcome.result
    if result is None or outcome.type_oids is None:
        raise _refuse("COPY of a statement that returns no rows (only SELECT)")
    lines = copy_lines(result, outcome.type_oids, request.options, tz)
    return CopyOut(len(result.columns), lines, len(result.rows))
