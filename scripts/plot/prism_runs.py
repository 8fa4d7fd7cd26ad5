"""Reading Prism runs for the plot scripts: run.h5 files (h5py, SWMR mode, so
live and killed runs read too), run directories and sweep directories.

A path is a run.h5, a run directory holding one, or a sweep directory: its
summary.csv rows (run_dir column) or, without one, every run.h5 below it.
"""
import csv
import os
import re

import h5py
import numpy as np


class Run:
    def __init__(self, path, name=None):
        self.path = path
        self.name = name or os.path.basename(os.path.dirname(os.path.abspath(path)))
        with h5py.File(path, "r", swmr=True) as f:
            self.heads = [int(h) for h in f.attrs["heads"]]
            self.seed = int(f.attrs["seed"])
            self.config = text(f.attrs["config"])
        m = re.search(r"^\s*d_model:\s*(\d+)", self.config, re.M)
        self.d_model = int(m.group(1)) if m else None

    def schedule(self):
        """'[2, 4]' or 'uniform 4' -- what the legend shows."""
        if len(set(self.heads)) == 1:
            return f"uniform {self.heads[0]}"
        return compact(self.heads)

    def label(self):
        return f"{self.name} ({self.schedule()}, seed {self.seed})"

    def series(self, group, column):
        """The complete rows of /group/column (len(group/step) of them)."""
        with h5py.File(self.path, "r", swmr=True) as f:
            n = len(f[f"{group}/step"])
            return f[f"{group}/step"][:n], f[f"{group}/{column}"][:n]

    def group(self, name):
        """{dataset path: array} and attributes of a result group, or None."""
        with h5py.File(self.path, "r", swmr=True) as f:
            if name not in f:
                return None
            g = f[name]
            data = {}
            g.visititems(lambda k, v: data.__setitem__(k, values(v)) if isinstance(v, h5py.Dataset) else None)
            attrs = {k: text(v) for k, v in g.attrs.items()}
            return data, attrs


def values(dataset):
    """A dataset's values; strings (fixed-length, or variable-length in older runs) as str."""
    v = dataset[()]
    if isinstance(v, np.ndarray) and v.dtype.kind in "OS":
        return np.array([text(x) for x in v.ravel()], dtype=object).reshape(v.shape)
    return text(v)


def text(value):
    """A string attribute as str: Prism writes fixed-length UTF-8 (h5py gives numpy bytes, NULs
    stripped); runs written before that, and other tools, write variable-length ones (str)."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


def compact(heads):
    """[3,3,3,6,6,6,12,...] -> '3x3,6x3,12x6'."""
    out, i = [], 0
    while i < len(heads):
        j = i
        while j < len(heads) and heads[j] == heads[i]:
            j += 1
        out.append(f"{heads[i]}x{j - i}" if j - i > 1 else str(heads[i]))
        i = j
    return ",".join(out)


def transitions(heads):
    """Layer boundaries (l + 0.5) where the head count changes."""
    return [l + 0.5 for l in range(len(heads) - 1) if heads[l] != heads[l + 1]]


def find_runs(paths):
    runs = []
    for p in paths:
        if os.path.isfile(p):
            runs.append(Run(p))
        elif os.path.isfile(os.path.join(p, "run.h5")):
            runs.append(Run(os.path.join(p, "run.h5")))
        elif os.path.isfile(os.path.join(p, "summary.csv")):
            with open(os.path.join(p, "summary.csv"), newline="") as f:
                for row in csv.DictReader(f):
                    h5 = os.path.join(p, row["run_dir"], "run.h5")
                    if os.path.isfile(h5):
                        runs.append(Run(h5, row.get("name") or row["run_dir"]))
        elif os.path.isdir(p):
            found = sorted(os.path.join(d, "run.h5") for d, _, files in os.walk(p) if "run.h5" in files)
            if not found:
                raise SystemExit(f"{p}: no run.h5 below this directory. Fix: pass runs made by prism train or prism sweep")
            runs.extend(Run(h5, os.path.relpath(os.path.dirname(h5), p)) for h5 in found)
        else:
            raise SystemExit(f"{p}: no such file or directory. Fix: pass a run.h5, a run directory or a sweep directory")
    return runs


def output_path(args, default_stem):
    """--out, else <default_stem>.<--format>; the format follows --out's extension."""
    if args.out:
        return args.out
    return f"{default_stem}.{args.format}"


def add_output_args(parser, stem):
    parser.add_argument("--out", help=f"output file (default: {stem}.png; .pdf gives a PDF)")
    parser.add_argument("--format", choices=["png", "pdf"], default="png", help="format when --out is not given")
    parser.add_argument("--dpi", type=int, default=150)


def save(fig, args, stem):
    import matplotlib.pyplot as plt

    path = output_path(args, stem)
    fig.savefig(path, dpi=args.dpi, bbox_inches="tight")
    plt.close(fig)
    print(path)


def nan_to_none(a):
    a = np.asarray(a, dtype=float)
    return np.where(np.isfinite(a), a, np.nan)
