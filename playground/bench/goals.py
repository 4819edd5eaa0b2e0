"""What the benchmark is judged by: the goals, each against what was measured, and the headline
(the last stdout line). Pure pandas, no vLLM.

Ratios are the paired medians at n=16 (``HEADLINE_N``); the browser measures are medians over
the warm runs (the first run after start is measured on its own); memory and start come from the app
started as a person starts it (``browser``), else from this process's engine and UI.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import pandas as pd

from playground.bench.measure import HEADLINE_N

HEADLINE_RATIOS = ("wrapper/native", "ui/native", "native/hf", "native/limit")
EVERY_N = "every"

# (measure, at n (EVERY_N: the worst n; None: not per n), comparison, target)
GOALS = [
    ("native/limit", HEADLINE_N, ">=", 0.6),
    ("wrapper/native", HEADLINE_N, ">=", 0.97),
    ("ui/native", HEADLINE_N, ">=", 0.95),
    ("native/hf", HEADLINE_N, ">=", 2.0),
    ("children cache hit", EVERY_N, ">=", 0.90),
    ("first visible token, warm (s)", 8, "<=", 1.0),
    ("page updates per second", EVERY_N, "<", 20),
    ("longest frame gap (ms)", 32, "<", 500),  # a tab that paints nothing for half a second has stalled
    ("app resident memory (GiB)", None, "<=", 2.5),
    ("start to a working page (s)", None, "<=", 30),
]
COMPARE = {"<=": operator.le, ">=": operator.ge, "<": operator.lt}
BROWSER = {"first visible token, warm (s)": "first_visible_s", "page updates per second": "updates_per_s",
           "longest frame gap (ms)": "longest_frame_gap_ms"}


def headline_n(ns) -> int:
    ns = sorted(set(ns))
    return HEADLINE_N if HEADLINE_N in ns else ns[-1]


def median_ratio(ratios: pd.DataFrame, name: str, n: int) -> float:
    values = ratios.loc[(ratios["n"] == n) & (ratios["name"] == name), "ratio"].dropna() if len(ratios) else []
    return float(values.median()) if len(values) else math.nan


def app_memory_gib(environment: dict[str, Any]) -> float:
    """The app's resident memory: the app started as a person starts it, else this process's."""
    app = environment.get("app") or {}
    if "memory" in app:
        return app["memory"]["rss_gib"]
    here = environment.get("memory_app") or {}
    return here.get("rss_mib", math.nan) / 1024


def headline(ratios: pd.DataFrame, environment: dict[str, Any] | None = None, n: int = HEADLINE_N) -> str:
    """``wrapper/native=X ui/native=Y native/hf=Z native/limit=W rss_gib=M`` (medians at n)."""
    parts = [f"{name}={median_ratio(ratios, name, n):.2f}" for name in HEADLINE_RATIOS]
    return " ".join(parts + [f"rss_gib={app_memory_gib(environment or {}):.2f}"])


def browser_runs(environment: dict[str, Any]) -> pd.DataFrame:
    runs = (environment.get("app") or {}).get("runs") or []
    return pd.DataFrame(runs)


def browser_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Median of every browser measure per kind of run (first after start, warm) and n."""
    if not len(runs):
        return pd.DataFrame()
    measures = ["first_visible_s", "finished_s", "updates_per_s", "longest_frame_gap_ms", "long_tasks_ms"]
    return runs.groupby(["run", "n"], sort=False)[measures].median().reset_index()


def goals(ratios: pd.DataFrame, cache: pd.DataFrame, environment: dict[str, Any] | None = None) -> pd.DataFrame:
    """Each goal against the medians measured (for a goal at every n, the worst n)."""
    environment = environment or {}
    runs = browser_runs(environment)
    warm = runs[runs["run"] == "warm"] if len(runs) else runs
    rows = []
    for name, at_n, sign, target in GOALS:
        where, value = "-", math.nan
        if "/" in name:
            value, where = median_ratio(ratios, name, at_n), f"n={at_n}"
        elif name == "children cache hit" and len(cache):
            medians = cache.groupby(["path", "n"])["cache_hit"].median().dropna()
            if len(medians):
                (path, n), value = medians.idxmin(), float(medians.min())
                where = f"{path} n={n}"
        elif name in BROWSER and len(warm):
            medians = warm.groupby("n")[BROWSER[name]].median().dropna()
            if at_n != EVERY_N:
                medians = medians[medians.index == at_n]
            if len(medians):
                worst = medians.idxmin() if sign == ">=" else medians.idxmax()
                value, where = float(medians[worst]), f"n={worst}"
        elif name.startswith("app resident"):
            value = app_memory_gib(environment)
            where = "python app.py" if "memory" in (environment.get("app") or {}) else "engine + UI in the bench"
        elif name.startswith("start") and "start_s" in (environment.get("app") or {}):
            value, where = environment["app"]["start_s"], "python app.py"
        at = " at every n" if at_n == EVERY_N else f" at n={at_n}" if at_n else ""
        rows.append({"goal": f"{name} {sign} {target:g}{at}", "measured": value, "where": where,
                     "met": "n/a" if math.isnan(value) else ("yes" if COMPARE[sign](value, target) else "NO")})
    return pd.DataFrame(rows)
