"""Checks that a report's report.h5 holds every CSV table of the report, read with h5py and
the csv module alone: the same columns in the same order, and each cell the same (numbers
to 1e-12 relative, an empty CSV cell as NaN or "", text as is). Prints a JSON summary.
Usage: report_h5_check.py REPORT_DIR"""
import csv
import glob
import json
import math
import os
import sys

import h5py


def same(text, value):
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if isinstance(value, str):
        return value == text
    if text == "":
        return math.isnan(float(value))
    return math.isclose(float(text), float(value), rel_tol=1e-12, abs_tol=0.0)


def main(report):
    checked = {}
    with h5py.File(os.path.join(report, "report.h5"), "r") as f:
        for path in sorted(glob.glob(os.path.join(report, "*.csv"))):
            name = os.path.basename(path)[:-4]
            with open(path, newline="") as c:
                rows = list(csv.reader(c))
            header, body = rows[0], rows[1:]
            if name not in f:
                sys.exit(f"report.h5 has no table {name}")
            g = f[name]
            columns = [c.decode("utf-8") if isinstance(c, bytes) else c for c in g["_columns"][()]]
            if columns != header:
                sys.exit(f"{name}: columns {columns} != CSV header {header}")
            for j, col in enumerate(header):
                values = g[col.replace("/", "_")][()]
                if len(values) != len(body):
                    sys.exit(f"{name}/{col}: {len(values)} values for {len(body)} rows")
                for i, row in enumerate(body):
                    if not same(row[j], values[i]):
                        sys.exit(f"{name}/{col} row {i}: CSV {row[j]!r}, report.h5 {values[i]!r}")
            checked[name] = len(body)
    print(json.dumps(checked))


if __name__ == "__main__":
    main(sys.argv[1])
