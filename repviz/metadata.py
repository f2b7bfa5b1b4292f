"""Probe metadata: named columns of per-example values (text, categories, numbers) stored once with the probe.

As in the Embedding Projector's metadata TSV, a column holds one value per probe example, in probe order. Its kind
says how the tab shows it: ``"category"`` (few distinct strings, integers or booleans: a palette and a legend),
``"text"`` (many distinct strings: the hover card, search), ``"number"`` (a continuous colour scale; NaN is
missing). The kinds are one table, :data:`KINDS`: what values each may hold and how the tab draws it
(:func:`kinds_table`, for the run index).

Stored as one JSON file (:meth:`Metadata.to_json`, written atomically by :mod:`repviz.store`), not as fixed-width
unicode ``.npy`` columns: a text column then costs its characters, not n times the longest text in UTF-32; a
column keeps its kind and type beside its values; the plugin serves it as read; no pickle is ever involved
(missing numbers are ``null``).
"""

from __future__ import annotations

import csv
import io
import math
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
        The numpy dtype kinds its values may have (``"U"`` strings, ``"i"`` integers, ``"f"`` floats, ``"b"``
        booleans).
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
_FORMAT = 1
_TYPES = {"str": str, "int": int, "float": float, "bool": bool}


class Metadata(Mapping):
    """Read-only mapping column name -> numpy array (one value per probe example), with each column's kind."""

    def __init__(self, columns: Mapping[str, np.ndarray] | None = None, kinds: Mapping[str, str] | None = None):
        self._columns = {}
        for name, values in (columns or {}).items():
            values = np.array(values)
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
        """The stored form: ``{"format", "n", "columns": [{"name", "kind", "type", "values"}]}``, NaN as null."""
        n = len(next(iter(self._columns.values()))) if self._columns else 0
        cols = []
        for name, values in self._columns.items():
            kind = values.dtype.kind
            typ = {"U": "str", "b": "bool", "i": "int", "f": "float"}[kind]
            out = values.tolist()
            if typ == "float":
                out = [None if math.isnan(v) else v for v in out]
            cols.append({"name": name, "kind": self._kinds[name], "type": typ, "values": out})
        return {"format": _FORMAT, "n": n, "columns": cols}


def from_json(obj: Any, n: int) -> Metadata:
    """The metadata stored as ``obj`` (see :meth:`Metadata.to_json`) for a probe of ``n`` examples; anything else
    raises ``ValueError`` saying what is wrong (the store names the file)."""
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
        columns[name] = _array([math.nan if v is None else v for v in values] if typ == "float" else values, typ)
        kinds[name] = col["kind"]
    return Metadata(columns, kinds)


def columns_from(data: Any, n: int, kinds: Mapping[str, str] | None = None) -> Metadata:
    """Metadata from ``data`` (a mapping column -> sequence, or a pandas DataFrame) for a probe of ``n`` examples.

    Strings, integers, floats (NaN or None: missing) and booleans; a column of strings with missing values (None,
    NaN, pandas' NA) gets "", a column of booleans with missing values becomes the strings "True", "False" and
    "". Kinds are inferred (see :data:`MAX_CATEGORIES`; pandas' ``category`` dtype is a category) unless
    ``kinds`` names them. A column of the wrong length, mixed types, other values (dates: convert them to
    strings) or a kind its values cannot have raises one ``ValueError`` line naming the column.
    """
    if hasattr(data, "columns") and hasattr(data, "dtypes"):  # a pandas DataFrame, without importing pandas
        categorical = {str(c) for c, t in data.dtypes.items() if str(t) == "category"}
        # pandas' own dtypes (category, Int64, boolean, string) mark a missing value pd.NA: None here
        given = {str(c): data[c].to_numpy() if isinstance(data[c].dtype, np.dtype) else
                 data[c].to_numpy(dtype=object, na_value=None) for c in data.columns}
    elif isinstance(data, Mapping):
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
        if values.dtype.kind not in KINDS[kind].dtypes:
            raise ValueError(f"metadata column {name!r} holds {values.dtype.kind == 'U' and 'strings' or 'numbers'}, "
                             f"which cannot be a {kind!r} column; give another kind or leave it to be inferred")
        out_kinds[name] = kind
    return Metadata(columns, out_kinds)


def kinds_table() -> dict[str, dict]:
    """:data:`KINDS` as JSON for the tab: each kind's ``dtypes``, ``colours`` and ``card_text``."""
    return {name: {k: v for k, v in asdict(kind).items() if k != "name"} for name, kind in KINDS.items()}


def parse_tsv(text: str, name: str = "the TSV") -> dict[str, list]:
    """The columns of tab-separated ``text`` (from the file ``name``) with a header line, the Embedding Projector's
    metadata TSV: a column whose non-empty cells are all numbers becomes numbers (empty cells: NaN), any other
    stays strings. :func:`repviz.store.write_metadata` reads such a file."""
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or not any(rows[0]):
        raise ValueError(f"{name} has no header line; its first line must name the columns")
    header, body = rows[0], [r for r in rows[1:] if r]
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


def _array(values: list, typ: str) -> np.ndarray:
    dtype = {"str": np.str_, "int": np.int64, "float": np.float64, "bool": np.bool_}[typ]
    return np.array(values, dtype=dtype) if values else np.zeros(0, dtype=dtype)


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
        return arr.astype(np.str_)
    if arr.dtype.kind in "biuf":
        return arr.astype({"b": np.bool_, "i": np.int64, "u": np.int64, "f": np.float64}[arr.dtype.kind])
    items = [v.item() if isinstance(v, np.generic) else v for v in arr.tolist()]
    present = [v for v in items if not _missing(v)]
    if all(isinstance(v, str) for v in present):
        return _array(["" if _missing(v) else v for v in items], "str")
    if present and all(isinstance(v, bool) for v in present):  # with a missing value: "True", "False" and ""
        return _array(items, "bool") if len(present) == n else _array(["" if _missing(v) else str(v)
                                                                       for v in items], "str")
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        if len(present) == n and all(isinstance(v, int) for v in present):
            return _array(items, "int")
        return _array([math.nan if _missing(v) else float(v) for v in items], "float")
    kinds = sorted({type(v).__name__ for v in present})
    if len(kinds) == 1:
        raise ValueError(f"metadata column {name!r} holds {kinds[0]} values; give strings, numbers or booleans "
                         f"(e.g. convert it with .astype(str))")
    raise ValueError(f"metadata column {name!r} mixes {', '.join(kinds)}; give one type per column (strings, "
                     f"numbers or booleans; None or NaN for a missing value)")


def _infer_kind(values: np.ndarray, n: int) -> str:
    """``"number"`` for floats, ``"category"`` for booleans and for strings or integers with few distinct values
    (see :data:`MAX_CATEGORIES`), else ``"text"`` (strings) or ``"number"`` (integers)."""
    if values.dtype.kind == "b":
        return "category"
    if values.dtype.kind == "f":
        return "number"
    few = len(np.unique(values)) <= min(MAX_CATEGORIES, n // 2)
    return "category" if few else "text" if values.dtype.kind == "U" else "number"
