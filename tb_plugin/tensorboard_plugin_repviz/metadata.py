"""The probe metadata of a run for the tab: its columns in the run index, their values through ``/metadata``.

The run is looked up by name in the catalog (``NotFoundError`` otherwise, never a path); the values come from
:attr:`repviz.service.Probe.metadata` and go out as strict JSON (a missing number as null).
"""

from __future__ import annotations

import math

from repviz.service import METADATA_KINDS, Probe, probe_columns

from .catalog import Catalog


def index_entry(probe: Probe) -> dict:
    """The run index's fields: ``metadata`` (name, kind, distinct values of each column) and ``metadata_error``
    (the one-line error of a damaged metadata file, whose run stays browsable; else None)."""
    try:
        return {"metadata": probe_columns(probe).summary(), "metadata_error": None}
    except (ValueError, LookupError) as e:  # DamagedFileError, UnsafeFileError
        return {"metadata": [], "metadata_error": str(e).splitlines()[0]}


def metadata_impl(catalog: Catalog, run_name: str) -> dict:
    """Every column of run ``run_name``: name, kind, how the tab draws its kind (``colours``: "scale" or
    "palette"; ``card_text``: shown as the probe's text on the hover card), number of distinct values and the
    values in probe order."""
    probe = catalog.run(run_name).probe
    metadata = probe_columns(probe)
    columns = []
    for column in metadata.summary():
        values = metadata[column["name"]].tolist()
        if metadata[column["name"]].dtype.kind == "f":
            values = [v if math.isfinite(v) else None for v in values]
        drawn = {k: v for k, v in METADATA_KINDS[column["kind"]].items() if k in ("colours", "card_text")}
        columns.append({**column, **drawn, "values": values})
    return {"run": run_name, "n": len(probe), "columns": columns}

