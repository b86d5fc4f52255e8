#!/usr/bin/env python3
"""Reads the files `scaffold power --df-out` writes with pandas, as jpwr's users do, for
tests/e2e/test_power_jpwr.cpp: an independent reader of the HDF5 layout (pandas.read_hdf through
PyTables) and of the CSV text (pandas.read_csv).

  read_jpwr_files.py dump PATH...   JSON on stdout: per path its HDF5 keys (h5 only), and the
                                    table: "frame" (columns, index, rows) or "series" (index,
                                    values); NaN as null
  read_jpwr_files.py print PATH     the energy Series of an energy.*.csv as print() shows it
  read_jpwr_files.py layout PATH... each h5 file against the one pandas writes for the table it
                                    reads there (to_hdf, key "jpwr", uncompressed): every group,
                                    dataset (dtype, shape) and attribute (value, HDF5 type, size,
                                    character set) read with h5py; differences on stdout, exit 1
"""
import json
import math
import os
import sys
import tempfile
import warnings

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


def structure(path):
    import h5py

    def attrs(obj):
        out = {}
        for k in obj.attrs:
            a = obj.attrs.get_id(k)
            t = a.get_type()
            cset = t.get_cset() if hasattr(t, "get_cset") else None
            out[k] = (repr(obj.attrs[k]), type(t).__name__, a.shape, t.get_size(), cset)
        return out

    nodes = {}
    with h5py.File(path, "r") as f:
        nodes["/"] = (attrs(f), None)

        def visit(name, obj):
            shape = (obj.dtype.str, obj.shape) if isinstance(obj, h5py.Dataset) else None
            nodes[name] = (attrs(obj), shape)

        f.visititems(visit)
    return nodes


def layout(paths):
    differences = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            reference = os.path.join(tmp, os.path.basename(path))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pd.read_hdf(path, key="jpwr").to_hdf(reference, key="jpwr", mode="w")
            ours, theirs = structure(path), structure(reference)
            for name in sorted(set(ours) | set(theirs)):
                if ours.get(name) != theirs.get(name):
                    differences += 1
                    print(f"{path}: {name}: ours {ours.get(name)}, pandas {theirs.get(name)}")
    sys.exit(1 if differences else 0)


def main():
    if sys.argv[1] == "dump":
        json.dump({p: read(p) for p in sys.argv[2:]}, sys.stdout)
    elif sys.argv[1] == "layout":
        layout(sys.argv[2:])
    elif sys.argv[1] == "print":
        series = pd.read_csv(sys.argv[2], index_col=0)["0"]
        series.name = None
        series.index.name = None
        print(series)
    else:
        sys.exit(f"unknown mode {sys.argv[1]!r}: expected dump, print or layout")


if __name__ == "__main__":
    main()
