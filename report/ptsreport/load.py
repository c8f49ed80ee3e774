"""Read one run directory into a Run: the CSV files checked against schema.py,
env.json with control characters stripped, run.json (how far the run got), and whether
the run's ranks shared cores."""

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from . import schema


class ReportError(Exception):
    """An input problem that stops the report (exit status 2)."""


@dataclass(frozen=True)
class Oversubscription:
    """Whether some node ran more ranks than it has cores: then timings measure the
    sharing, not the strategy. state is "yes", "no" or "unknown"."""
    state: str
    detail: str  # one sentence: what it was decided from


@dataclass
class Run:
    run_dir: Path
    cases: pd.DataFrame  # one row per case; metrics.py adds derived columns
    comm: pd.DataFrame
    memory: pd.DataFrame
    stages: pd.DataFrame
    steps: pd.DataFrame  # one row per case per step: the loss curves
    staleness: pd.DataFrame  # gradients per staleness of the asynchronous cases (often empty)
    env: dict  # env.json, strings cleaned; {} when absent
    oversubscription: Oversubscription
    absent: dict = field(default_factory=dict)  # file -> optional columns it lacks
    absent_files: list = field(default_factory=list)  # optional files not in the run (older run)
    header: dict = field(default_factory=dict)  # file -> its columns in file order
    progress: dict = field(default_factory=dict)  # run.json: state, expected, completed; {} when absent

    @property
    def name(self) -> str:
        return self.run_dir.resolve().name

    @property
    def workloads(self) -> list:
        """Workloads in the order the run first mentions them."""
        return list(dict.fromkeys(self.cases["workload"]))


def read_csv(run_dir: Path, name: str, columns=None, optional=None) -> tuple:
    """(frame, absent optional columns) of one CSV: text columns as strings, the
    others as floats (empty or non-numeric fields become NaN). `columns` defaults to
    the run directory's schema for `name`; an optional file that is absent gives None."""
    columns = schema.FILES[name] if columns is None else columns
    optional = name in schema.OPTIONAL_FILES if optional is None else optional
    path = run_dir / name
    if not path.is_file():
        if optional:
            return None, [c.name for c in columns]
        raise ReportError(f"{path}: file not found")
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise ReportError(f"{path}: file is empty (no header row)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot parse CSV: {exc}") from None
    missing = [c for c in columns if c.required and c.name not in df.columns]
    if missing:
        needs = ", ".join(dict.fromkeys(c.used_for for c in missing))
        raise ReportError(f"{path}: missing column(s) {', '.join(c.name for c in missing)} "
                          f"(needed for {needs})")
    absent = [c.name for c in columns if c.name not in df.columns]
    for c in columns:
        if c.name not in df.columns:
            df[c.name] = "" if c.text else math.nan
        elif not c.text:
            df[c.name] = pd.to_numeric(df[c.name], errors="coerce")
    return df, absent


CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def clean(value):
    """The JSON value with control characters (such as the NUL some MPI version
    strings end in) removed from every string."""
    if isinstance(value, str):
        return CONTROL_CHARS.sub("", value)
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def read_json(path: Path):
    """The JSON value in path; None when there is no such file."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: invalid JSON: {exc}") from None


def read_env(run_dir: Path) -> dict:
    env = read_json(run_dir / "env.json")
    if env is None:
        return {}
    return clean(env if isinstance(env, dict) else {"env": env})


def read_progress(run_dir: Path) -> dict:
    """run.json's state, expected and completed case counts ({} for a run from before it)."""
    data = read_json(run_dir / "run.json")
    if not isinstance(data, dict):
        return {}
    return {k: data[k] for k in ("state", "expected", "completed") if k in data}


def oversubscription(env: dict, cases: pd.DataFrame) -> Oversubscription:
    """Newer runs record it (env.json oversubscribed, cores, ranks_per_node; cases.csv
    oversubscribed). For older runs compare the ranks with env.json cores when present."""
    cores, per_node = env.get("cores"), env.get("ranks_per_node")
    shared = f"{per_node} ranks on a node with {cores} usable cores"
    if isinstance(env.get("oversubscribed"), bool):
        return Oversubscription("yes" if env["oversubscribed"] else "no", f"env.json: {shared}")
    flags = cases["oversubscribed"].dropna()
    if not flags.empty:
        state = "yes" if (flags > 0).any() else "no"
        return Oversubscription(state, "cases.csv oversubscribed column")
    ranks = per_node if isinstance(per_node, int) else env.get("ranks")
    if isinstance(cores, int) and isinstance(ranks, int):
        state = "yes" if ranks > cores else "no"
        return Oversubscription(state, f"env.json: {ranks} ranks, {cores} cores")
    return Oversubscription("unknown", "env.json does not record the cores (older run)")


def load_run(run_dir: Path) -> Run:
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir}: not a directory")
    frames, absent, missing, header = {}, {}, [], {}
    for name in schema.FILES:
        frames[name], absent[name] = read_csv(run_dir, name)
        if frames[name] is not None:
            header[name] = [c for c in frames[name].columns if c not in absent[name]]
        else:
            missing.append(name)
            frames[name] = pd.DataFrame({c.name: pd.Series(dtype=str if c.text else float)
                                         for c in schema.FILES[name]})
    cases = frames["cases.csv"]
    env = read_env(run_dir)
    return Run(run_dir=run_dir, cases=cases, comm=frames["comm.csv"], memory=frames["memory.csv"],
               stages=frames["stages.csv"], steps=frames["steps.csv"], staleness=frames["staleness.csv"],
               env=env, oversubscription=oversubscription(env, cases),
               absent={k: v for k, v in absent.items() if v and k not in missing},
               absent_files=[f for f in missing if f not in schema.WHEN_USED_FILES], header=header,
               progress=read_progress(run_dir))
