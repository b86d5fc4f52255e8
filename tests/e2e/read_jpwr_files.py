#!/usr/bin/env python3
"""Reads the files `scaffold power --df-out` writes with pandas, as jpwr's users do, for
tests/e2e/test_power_jpwr.cpp: an independent reader of the HDF5 layout (pandas.read_hdf through
PyTables) and of the CSV text (pandas.read_csv).

  read_jpwr_files.py dump PATH...   JSON on stdout: per path its HDF5 keys (h5 only), and the
                                    table: "frame" (columns, index, rows) or "series" (index,
                                    values); NaN as null
  read_jpwr_files.py print PATH     the energy Series of an energy.*.csv as print() shows it
"""
import json
import math
import sys

import pandas as pd


def clean(v):
    v = float(v)
    return None if math.isnan(v) else v


def table(obj):
    if isinstance(obj, pd.Series):
        return {"kind": "series", "index": [str(i) for i in obj.index],
                "values": [clean(v) for v in obj.values]}
    return {"kind": "frame", "columns": [str(c) for c in obj.columns],
            "index": [int(i) for i in obj.index],
            "rows": [[clean(v) for v in row] for row in obj.itertuples(index=False)]}


def read(path):
    if path.endswith(".h5"):
        with pd.HDFStore(path, mode="r") as store:
            keys = list(store.keys())
        out = table(pd.read_hdf(path, key="jpwr"))
        out["keys"] = keys
        return out
    frame = pd.read_csv(path, index_col=0)
    if list(frame.columns) == ["0"]:  # a Series written by to_csv: header ",0"
        series = frame["0"]
        series.name = None
        return table(series)
    return table(frame)


def main():
    if sys.argv[1] == "dump":
        json.dump({p: read(p) for p in sys.argv[2:]}, sys.stdout)
    elif sys.argv[1] == "print":
        series = pd.read_csv(sys.argv[2], index_col=0)["0"]
        series.name = None
        series.index.name = None
        print(series)
    else:
        sys.exit(f"unknown mode {sys.argv[1]!r}: expected dump or print")


if __name__ == "__main__":
    main()
