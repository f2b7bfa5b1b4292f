"""Probe metadata: named columns of per-example values (text, categories, numbers) stored once with the probe.

As in the Embedding Projector's metadata TSV, a column holds one value per probe example, in probe order. Its kind
says how the tab shows it: ``"category"`` (few distinct strings, integers or booleans: a palette and a legend),
``"text"`` (many distinct strings: the hover card, search), ``"number"`` (a continuous colour scale; NaN is
missing). The kinds are one table, :data:`KINDS`: what values each may hold and how the tab draws it
(:func:`kinds_table`, for the run index).

Stored as one JSON file (:meth:`Metadata.to_json`, written atomically by :mod:`repviz.store`), not as fixed-width
unicode ``.npy`` columns: a text column then costs its characters, not n times the longest text in UTF-32; a
column keeps its kind and type beside its values; the plugin serves it as read; no pickle is ever involved
(missing numbers are ``null``). Read back, a text column is an object array of Python strings for the same reason
(numpy's ``str_`` arrays are fixed-width), and a file over :data:`MAX_FILE_BYTES` is neither written nor read.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ColumnKind:
    """One kind of metadata column.

    Attributes
    ----------
    name : str
        As stored and as ``kinds=`` names it.
    dtypes : str
        The types its values may have, as numpy's dtype kinds (``"U"`` strings, held as an object array of
        ``str``; ``"i"`` integers, ``"f"`` floats, ``"b"`` booleans).
    colours : {"palette", "scale"}
        How the tab colours points by it: a colour per value with a legend, or a continuous scale.
    card_text : bool
        A probe without thumbnails shows its first such column in the hover card where an image would be.
    """

    name: str
    dtypes: str
    colours: str
    card_text: bool = False


#: The kinds of column, by name: the one table of what each may hold and how the tab draws it.
KINDS: dict[str, ColumnKind] = {kind.name: kind for kind in (
    ColumnKind("category", dtypes="Uibf", colours="palette"),
    ColumnKind("text", dtypes="U", colours="palette", card_text=True),
    ColumnKind("number", dtypes="if", colours="scale"),
)}
#: A column of strings or integers with at most this many distinct values (and at most half as many as examples)
#: is a category: more would not fit a palette and a legend.
MAX_CATEGORIES = 20
#: The largest metadata file written or read (its JSON, in bytes): a larger one is refused in one line, so that
#: reading a run's metadata never takes more than a few times this in memory.
MAX_FILE_BYTES = 256 * 2**20
_FORMAT = 1
_TYPES = {"str": str, "int": int, "float": float, "bool": bool}


class Metadata(Mapping):
    """Read-only mapping column name -> numpy array (one value per probe example), with each column's kind.
    A column of strings is an object array of ``str``: each value costs its own length."""

    def __init__(self, columns: Mapping[str, np.ndarray] | None = None, kinds: Mapping[str, str] | None = None):
        self._columns = {}
        for name, values in (columns or {}).items():
            values = _column(values)
            values.flags.writeable = False
            self._columns[name] = values
        self._kinds = dict(kinds or {})

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self._columns[name]
        except KeyError:
            raise KeyError(f"no metadata column {name!r}; the probe has: {', '.join(map(repr, self)) or 'none'}") \
                from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    def __repr__(self) -> str:
        return f"Metadata({', '.join(f'{c}: {k}' for c, k in self.kinds.items())})"

    @property
    def kinds(self) -> dict[str, str]:
        """Column name -> ``"category"``, ``"text"`` or ``"number"``."""
        return dict(self._kinds)

    def distinct(self, name: str) -> int:
        """How many distinct values column ``name`` holds (NaN not counted)."""
        values = self[name]
        return len(np.unique(values[~np.isnan(values)] if values.dtype.kind == "f" else values))

    def summary(self) -> list[dict]:
        """Name, kind and number of distinct values of each column, in order (the run index, ``repviz info``)."""
        return [{"name": c, "kind": self._kinds[c], "distinct": self.distinct(c)} for c in self]

    def to_json(self) -> dict:
        """The stored form: ``{"format", "n", "columns": [{"name", "kind", "type", "values"}]}``, NaN as null
        (strict JSON)."""
        n = len(next(iter(self._columns.values()))) if self._columns else 0
        cols = []
        for name, values in self._columns.items():
            typ = {"U": "str", "b": "bool", "i": "int", "f": "float"}[value_kind(values)]
            out = values.tolist()
            if typ == "float":
                out = [v if math.isfinite(v) else None for v in out]
            cols.append({"name": name, "kind": self._kinds[name], "type": typ, "values": out})
        return {"format": _FORMAT, "n": n, "columns": cols}


def dumps(metadata: Metadata) -> str:
    """``metadata`` as the JSON text of its file (ASCII: as many bytes as characters); one over
    :data:`MAX_FILE_BYTES` raises one ``ValueError`` line."""
    text = json.dumps(metadata.to_json(), indent=1)
    if len(text) > MAX_FILE_BYTES:
        longest = max(((len(v), c) for c in metadata if value_kind(metadata[c]) == "U" for v in metadata[c]),
                      default=(0, ""))
        raise ValueError(f"the metadata is {len(text) / 2**20:.0f} MiB as JSON, over the {MAX_FILE_BYTES // 2**20} "
                         f"MiB repviz stores (its longest value: {longest[0]:,} characters in column "
                         f"{longest[1]!r}); store shorter texts (e.g. their first 64 KiB) and keep the rest apart")
    return text


def from_json(obj: Any, n: int) -> Metadata:
    """The metadata stored as ``obj`` (see :meth:`Metadata.to_json`) for a probe of ``n`` examples; anything else
    raises ``ValueError`` saying what is wrong (the store names the file). An infinity (JSON ``Infinity``, never
    written now) is read as a missing number, as the tab shows it."""
    if not isinstance(obj, dict) or not isinstance(obj.get("columns"), list):
        raise ValueError("is not a repviz metadata file (no 'columns' list)")
    columns, kinds = {}, {}
    for i, col in enumerate(obj["columns"]):
        if not isinstance(col, dict) or not isinstance(col.get("name"), str) or col["name"] in columns:
            raise ValueError(f"column {i} has no name, or a name given twice")
        name, typ, values = col["name"], col.get("type"), col.get("values")
        if col.get("kind") not in KINDS or typ not in _TYPES or not isinstance(values, list) or len(values) != n:
            raise ValueError(f"column {name!r} is not a kind, type and {n} values (one per probe example)")
        if not all(_is(v, typ) for v in values):
            raise ValueError(f"column {name!r} holds values that are not {typ}")
        columns[name] = _array([v if v is not None and math.isfinite(v) else math.nan for v in values]
                               if typ == "float" else values, typ, name)
        kinds[name] = col["kind"]
    return Metadata(columns, kinds)


def columns_from(data: Any, n: int, kinds: Mapping[str, str] | None = None) -> Metadata:
    """Metadata from ``data`` (a mapping column -> sequence, or a pandas DataFrame) for a probe of ``n`` examples.

    Strings, integers, floats (NaN or None: missing) and booleans; a column of strings with missing values (None,
    NaN, pandas' NA) gets "", a column of booleans with missing values becomes the strings "True", "False" and
    "". Kinds are inferred (see :data:`MAX_CATEGORIES`; pandas' ``category`` dtype is a category) unless
    ``kinds`` names them. A column of the wrong length, mixed types, infinities, other values (dates: convert
    them to strings), a kind its values cannot have, or a name given to two columns raises one ``ValueError``
    line naming the column.
    """
    if hasattr(data, "columns") and hasattr(data, "dtypes"):  # a pandas DataFrame, without importing pandas
        _unique_names([str(c) for c in data.columns], "the DataFrame")
        categorical = {str(c) for c, t in data.dtypes.items() if str(t) == "category"}
        # pandas' own dtypes (category, Int64, boolean, string) mark a missing value pd.NA: None here
        given = {str(c): data[c].to_numpy() if isinstance(data[c].dtype, np.dtype) else
                 data[c].to_numpy(dtype=object, na_value=None) for c in data.columns}
    elif isinstance(data, Mapping):
        _unique_names([str(c) for c in data], "the mapping")
        given, categorical = {str(c): v for c, v in data.items()}, set()
    else:
        raise TypeError(f"metadata must be a mapping column -> values or a pandas DataFrame, not "
                        f"{type(data).__name__}")
    kinds = {**{c: "category" for c in categorical}, **(kinds or {})}
    unknown = [c for c in kinds if c not in given]
    if unknown:
        raise ValueError(f"kinds name metadata column(s) {unknown} that are not given; the columns: {list(given)}")
    columns, out_kinds = {}, {}
    for name, values in given.items():
        if not name:
            raise ValueError("a metadata column needs a non-empty name")
        columns[name] = values = _convert(name, values, n)
        kind = kinds.get(name) or _infer_kind(values, n)
        if kind not in KINDS:
            raise ValueError(f"metadata column {name!r}: kind {kind!r} is not one of {', '.join(KINDS)}")
        if value_kind(values) not in KINDS[kind].dtypes:
            raise ValueError(f"metadata column {name!r} holds {value_kind(values) == 'U' and 'strings' or 'numbers'}, "
                             f"which cannot be a {kind!r} column; give another kind or leave it to be inferred")
        out_kinds[name] = kind
    return Metadata(columns, out_kinds)


def kinds_table() -> dict[str, dict]:
    """:data:`KINDS` as JSON for the tab: each kind's ``dtypes``, ``colours`` and ``card_text``."""
    return {name: {k: v for k, v in asdict(kind).items() if k != "name"} for name, kind in KINDS.items()}


def parse_tsv(text: str, name: str = "the TSV") -> dict[str, list]:
    """The columns of tab-separated ``text`` (from the file ``name``) with a header line, the Embedding Projector's
    metadata TSV: a column whose non-empty cells are all numbers becomes numbers (empty cells: NaN), any other
    stays strings. :func:`repviz.store.write_metadata` reads such a file.

    Split as the Projector splits it (lines, then tabs; no quoting), so a cell may be of any length; a byte order
    mark (as spreadsheets write) is dropped, and a header naming a column twice is refused in one line."""
    lines = re.split(r"\r\n|\r|\n", text.removeprefix("\ufeff"))
    if not any(lines[0].split("\t")):
        raise ValueError(f"{name} has no header line; its first line must name the columns")
    header, body = lines[0].split("\t"), [line.split("\t") for line in lines[1:] if line]
    _unique_names(header, name + "'s header")
    for line, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise ValueError(f"{name} line {line} has {len(row)} cells but the header names {len(header)} columns")
    return {column: _parse_cells([row[j] for row in body]) for j, column in enumerate(header)}


def info_line(run: Any) -> str:
    """The ``repviz info`` line of ``run``'s probe metadata: each column with its kind and number of distinct
    values, or the one-line error of a damaged file; "" for none."""
    try:
        probe = run.probe
    except (ValueError, LookupError):  # no probe stored (yet), or a damaged one: no metadata to list
        return ""
    try:
        metadata = probe.metadata
    except (ValueError, LookupError) as e:  # damaged (DamagedFileError) or leading out of the run (UnsafeFileError)
        return f"metadata: {e}"
    return "metadata: " + ", ".join(f"{c['name']} ({c['kind']}, {c['distinct']} distinct)"
                                    for c in metadata.summary()) if metadata else ""


def value_kind(values: np.ndarray) -> str:
    """The type of a column's values as :attr:`ColumnKind.dtypes` spells it: ``"U"`` for strings (an object
    array of ``str``), else the dtype's kind."""
    return "U" if values.dtype.kind in "OU" else values.dtype.kind


def _unique_names(names: list[str], where: str) -> None:
    """Refuse, in one line naming it, a column name that ``where`` gives twice."""
    seen: dict[str, int] = {}
    for i, column in enumerate(names, start=1):
        if column in seen:
            raise ValueError(f"{where} names metadata column {column!r} twice (columns {seen[column]} and {i}); "
                             f"give each column its own name")
        seen[column] = i


def _parse_cells(cells: list[str]) -> list:
    """TSV cells as ints, floats (empty: NaN) or, if any non-empty cell is not a number, the strings."""
    try:
        return [int(c) for c in cells]
    except ValueError:
        pass
    try:
        return [float(c) if c.strip() else math.nan for c in cells]
    except ValueError:
        return cells


def _is(v: Any, typ: str) -> bool:
    """Whether the JSON value ``v`` is one of a column of type ``typ`` (a float column's missing value is null)."""
    if typ == "float":
        return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
    return isinstance(v, _TYPES[typ]) and (typ == "bool" or not isinstance(v, bool))


def _array(values: list, typ: str, name: str = "") -> np.ndarray:
    """``values`` (all of type ``typ``) as column ``name``: strings as an object array, the others as numbers."""
    if typ == "str":
        return _strings(values)
    dtype = {"int": np.int64, "float": np.float64, "bool": np.bool_}[typ]
    try:
        return np.array(values, dtype=dtype) if values else np.zeros(0, dtype=dtype)
    except OverflowError:
        raise ValueError(f"metadata column {name!r} holds an integer outside the 64-bit range; give it as a float "
                         f"or a string") from None


def _strings(values: Any) -> np.ndarray:
    """An object array of the ``str`` values (not numpy's fixed-width ``str_``: n times the longest value)."""
    out = np.empty(len(values), dtype=object)
    out[:] = [str(v) for v in values]
    return out


def _column(values: Any) -> np.ndarray:
    """A column given to :class:`Metadata`: strings as an object array of ``str``, numbers as an array (copied)."""
    if isinstance(values, np.ndarray):
        return _strings(values.tolist()) if values.dtype.kind in "OUS" else values.copy()
    values = list(values)
    return _strings(values) if values and all(isinstance(v, str) for v in values) else np.array(values)


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _convert(name: str, values: Any, n: int) -> np.ndarray:
    """Column ``values`` as a 1-D str, int64, float64 or bool array of ``n`` values, or one ``ValueError`` line."""
    if not isinstance(values, np.ndarray):  # numpy would turn [1, "a"] into strings
        values = list(values)
        values = np.empty(len(values), dtype=object) if not values else np.array(values, dtype=object)
    if len(values) != n:
        raise ValueError(f"metadata column {name!r} has {len(values)} values but the probe has {n} examples; give "
                         f"one value per probe example, in probe order")
    arr = values
    if arr.ndim != 1:
        raise ValueError(f"metadata column {name!r} has shape {arr.shape}; give one value per probe example")
    if arr.dtype.kind in "US":
        return _strings(arr.astype(np.str_).tolist())
    if arr.dtype.kind in "biuf":
        return _finite(name, arr.astype({"b": np.bool_, "i": np.int64, "u": np.int64, "f": np.float64}[arr.dtype.kind]))
    items = [v.item() if isinstance(v, np.generic) else v for v in arr.tolist()]
    present = [v for v in items if not _missing(v)]
    if all(isinstance(v, str) for v in present):
        return _array(["" if _missing(v) else v for v in items], "str")
    if present and all(isinstance(v, bool) for v in present):  # with a missing value: "True", "False" and ""
        return _array(items, "bool") if len(present) == n else _array(["" if _missing(v) else str(v)
                                                                       for v in items], "str")
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        if len(present) == n and all(isinstance(v, int) for v in present):
            return _array(items, "int", name)
        return _finite(name, _array([math.nan if _missing(v) else float(v) for v in items], "float"))
    kinds = sorted({type(v).__name__ for v in present})
    if len(kinds) == 1:
        raise ValueError(f"metadata column {name!r} holds {kinds[0]} values; give strings, numbers or booleans "
                         f"(e.g. convert it with .astype(str))")
    raise ValueError(f"metadata column {name!r} mixes {', '.join(kinds)}; give one type per column (strings, "
                     f"numbers or booleans; None or NaN for a missing value)")


def _finite(name: str, values: np.ndarray) -> np.ndarray:
    """``values``, unless they hold an infinity (which JSON cannot store and the tab cannot colour): one
    ``ValueError`` line naming the column and what to give instead."""
    if values.dtype.kind == "f" and np.isinf(values).any():
        first = int(np.flatnonzero(np.isinf(values))[0])
        raise ValueError(f"metadata column {name!r} holds {int(np.isinf(values).sum())} infinite value(s) (the "
                         f"first at example {first}); give finite numbers, NaN or None for a missing one (e.g. "
                         f"frame.replace([np.inf, -np.inf], np.nan))")
    return values


def _infer_kind(values: np.ndarray, n: int) -> str:
    """``"number"`` for floats, ``"category"`` for booleans and for strings or integers with few distinct values
    (see :data:`MAX_CATEGORIES`), else ``"text"`` (strings) or ``"number"`` (integers)."""
    if values.dtype.kind == "b":
        return "category"
    if values.dtype.kind == "f":
        return "number"
    few = len(np.unique(values)) <= min(MAX_CATEGORIES, n // 2)
    return "category" if few else "text" if value_kind(values) == "U" else "number"
