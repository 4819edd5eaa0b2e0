"""From measurements to results: statistics, paired ratios, the goals each against what was
measured, the files, and the printed report ending with the headline (the last stdout line). Pure
pandas, no vLLM; plotly is imported when the files are written.

Ratios are the paired medians at n=16 (``HEADLINE_N``); the browser figures are medians over
the warm runs (the first run after start is its own figure); memory and start come from the app
started as a person starts it (``browser``), else from this process's engine and UI.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from playground.bench.measure import BASELINE, HEADLINE_N, PATHS, Settings
from playground.bundle_format import VERSION as BUNDLE_VERSION

# --- statistics and ratios ----------------------------------------------------------------------

# A measurement row's measured columns (the others say which request it was), summarized per (n, path).
MEASURED_COLUMNS = ["tokens_per_s", "ttft_ms", "itl_p50_ms", "itl_p99_ms", "cache_hit", "cpu_s_here", "cpu_s_engine"]


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """Median, min and max of every measured column per (n, path)."""
    stats = rows.groupby(["n", "path"], sort=True)[MEASURED_COLUMNS].agg(["median", "min", "max"])
    stats.columns = [f"{column}_{stat}" for column, stat in stats.columns]
    return stats.reset_index()


def ratio_pairs(paths: Iterable[str]) -> list[tuple[str, str]]:
    """(numerator, denominator): each path against native, and native against HF and against the
    machine's limit (the goals)."""
    paths = list(paths)
    pairs = [(p, BASELINE) for p in paths if p not in (BASELINE, "limit") and BASELINE in paths]
    for bottom in ("hf", "limit"):
        if bottom in paths and BASELINE in paths:
            pairs.append((BASELINE, bottom))
    return pairs


def paired_ratios(rows: pd.DataFrame) -> pd.DataFrame:
    """Tokens-per-second ratios taken within each repetition (the paths ran back to back)."""
    frames = []
    tps = rows.pivot_table(index=["n", "repetition"], columns="path", values="tokens_per_s") if len(rows) else None
    for top, bottom in ratio_pairs(tps.columns if tps is not None else []):
        value = (tps[top] / tps[bottom]).rename("ratio").reset_index()
        frames.append(value.assign(name=f"{top}/{bottom}"))
    if not frames:
        return pd.DataFrame(columns=["n", "repetition", "ratio", "name"])
    return pd.concat(frames, ignore_index=True)


def ratio_summary(ratios: pd.DataFrame) -> pd.DataFrame:
    """Median, min and max of each paired ratio per n."""
    stats = ratios.groupby(["n", "name"], sort=True)["ratio"].agg(["median", "min", "max"])
    return stats.reset_index()


def readable_table(summary: pd.DataFrame, ratios: pd.DataFrame) -> pd.DataFrame:
    """One row per (n, path): tokens/s and its ratio to native side by side, then the latencies."""
    table = summary.copy()
    to_native = ratio_summary(ratios) if len(ratios) else pd.DataFrame(columns=["n", "name", "median", "min", "max"])
    to_native = to_native[to_native["name"].str.endswith(f"/{BASELINE}")].copy()
    to_native["path"] = to_native["name"].str.split("/").str[0]
    table = table.merge(to_native[["n", "path", "median", "min", "max"]], on=["n", "path"], how="left")
    table.loc[table["path"] == BASELINE, ["median", "min", "max"]] = 1.0
    order = {p: i for i, p in enumerate(PATHS)}
    table = table.sort_values(["n", "path"], key=lambda c: c.map(order) if c.name == "path" else c)
    return pd.DataFrame({
        "n": table["n"], "path": table["path"],
        "tok/s": table["tokens_per_s_median"],
        "tok/s [min-max]": [f"{lo:.1f}-{hi:.1f}" for lo, hi in
                            zip(table["tokens_per_s_min"], table["tokens_per_s_max"], strict=True)],
        "x native": table["median"],
        "x native [min-max]": [f"{lo:.2f}-{hi:.2f}" for lo, hi in zip(table["min"], table["max"], strict=True)],
        "TTFT ms": table["ttft_ms_median"],
        "ITL p50 ms": table["itl_p50_ms_median"],
        "ITL p99 ms": table["itl_p99_ms_median"],
        "CPU s here": table["cpu_s_here_median"],
        "CPU s engine": table["cpu_s_engine_median"],
    })


# --- goals and the headline ---------------------------------------------------------------------

HEADLINE_RATIOS = ("wrapper/native", "ui/native", "native/hf", "native/limit")
EVERY_N = "every"
TWO_PLACES = "{:.2f}".format  # a callable: to_string passes a string format only to all-float columns

# (figure, at n (EVERY_N: the worst n; None: not per n), comparison, target)
GOALS = [
    ("native/limit", HEADLINE_N, ">=", 0.6),
    ("wrapper/native", HEADLINE_N, ">=", 0.97),
    ("ui/native", HEADLINE_N, ">=", 0.95),
    ("native/hf", HEADLINE_N, ">=", 2.0),
    ("children cache hit", EVERY_N, ">=", 0.90),
    ("first visible token, warm (s)", EVERY_N, "<", 1.0),
    ("page updates per second", 32, ">=", 8),
    ("page updates per second", 256, ">=", 4),
    ("longest frame gap (ms)", 256, "<", 250),  # a tab that paints nothing for a quarter second stutters
    ("bundle bytes per sampled token", None, "<=", 60),
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
    """Median of every browser figure per kind of run (first after start, warm) and n."""
    if not len(runs):
        return pd.DataFrame()
    figures = [f for f in ("first_visible_s", "finished_s", "updates_per_s", "steps_per_s", "longest_frame_gap_ms",
                           "long_tasks_ms", "bytes_per_update", "heap_mb") if f in runs]
    return runs.groupby(["run", "n"], sort=False)[figures].median().reset_index()


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
                if BROWSER[name] == "updates_per_s" and "steps_per_s" in warm:  # the page cannot outpace the engine
                    steps = warm[warm["n"] == worst]["steps_per_s"].median()
                    where += f" (the engine made {steps:.1f} steps/s)"
        elif name.startswith("bundle bytes") and environment.get("bundles"):  # the goal is without logprobs
            worst = max((b for b in environment["bundles"] if not b["logprobs"]), key=lambda b: b["bytes_per_token"])
            value, where = worst["bytes_per_token"], f"{worst['output_kind']}, n={worst['n']}"
        elif name.startswith("app resident"):
            value = app_memory_gib(environment)
            where = "python app.py" if "memory" in (environment.get("app") or {}) else "engine + UI in the bench"
        elif name.startswith("start") and "start_s" in (environment.get("app") or {}):
            value, where = environment["app"]["start_s"], "python app.py"
        at = " at every n" if at_n == EVERY_N else f" at n={at_n}" if at_n else ""
        rows.append({"goal": f"{name} {sign} {target:g}{at}", "measured": value, "where": where,
                     "met": "n/a" if math.isnan(value) else ("yes" if COMPARE[sign](value, target) else "NO")})
    return pd.DataFrame(rows)


# --- the report: files and printed tables --------------------------------------------------------

@dataclass
class Report:
    settings: Settings
    rows: pd.DataFrame
    cache: pd.DataFrame
    environment: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False

    @property
    def ratios(self) -> pd.DataFrame:
        return paired_ratios(self.rows)

    @property
    def summary(self) -> pd.DataFrame:
        return summarize(self.rows)

    def headline(self) -> str:
        return headline(self.ratios, self.environment, headline_n(self.rows["n"] if len(self.rows) else [HEADLINE_N]))


def caveats(report: Report) -> list[str]:
    env = report.environment
    hf = env.get("hf", {})
    pinned = f"pinned to cores {hf['pinned_to']}" if hf.get("pinned_to") else "unpinned"
    limit = env.get("limit") if isinstance(env.get("limit"), dict) else {}
    return [
        (f"The engine computes with {env.get('engine_threads')} thread(s) on cores {env.get('engine_cores')} "
         f"({env.get('cpu_plan') or 'vLLM decides'}); HF ran with {hf.get('threads')} torch thread(s) in this "
         f"process, {pinned}; the machine's limit with {limit.get('threads')}; dtype: vLLM "
         f"{env.get('engine_dtype')}, HF {hf.get('dtype')}."),
        ("The machine's limit times only the decode step's matrix multiplications (vLLM's own CPU kernels, "
         "weights of the model's shapes): attention, sampling and scheduling are what native/limit leaves out."),
        ("HF prefills n copies of the prompt (num_return_sequences); vLLM prefills it once and the children "
         "read it from the prefix cache. HF seeds one generator for the batch; vLLM seeds each sample."),
        ("Token times are arrivals at the caller; tokens in one output share a time (ITL 0). The ui path's "
         "caller is the API client in this process; /sample sends snapshots every 0.25 s."),
        f"The ui path ran mode={report.settings.ui_mode!r} through /sample on the same engine.",
        "Ratios are paired: taken within one repetition (the paths ran back to back), then median/min/max.",
    ]


def write_results(report: Report, out: Path, label: str) -> dict[str, Path]:
    """CSV and JSON tables, and the plotly chart of tokens per second against n."""
    import plotly.graph_objects as go

    out.mkdir(parents=True, exist_ok=True)
    files = {name: out / f"{label}-{name}" for name in
             ("measurements.csv", "summary.csv", "ratios.csv", "cache.csv", "results.json", "tokens_per_s.html")}
    summary, ratios = report.summary, report.ratios
    report.rows.to_csv(files["measurements.csv"], index=False)
    summary.to_csv(files["summary.csv"], index=False)
    ratio_summary(ratios).to_csv(files["ratios.csv"], index=False)
    report.cache.to_csv(files["cache.csv"], index=False)

    def records(frame: pd.DataFrame) -> list:
        return json.loads(frame.to_json(orient="records")) if len(frame) else []

    document = {
        "settings": asdict(report.settings), "environment": report.environment, "caveats": caveats(report),
        "interrupted": report.interrupted, "headline": report.headline(),
        "measurements": records(report.rows), "summary": records(summary),
        "ratios": records(ratio_summary(ratios)), "cache_probe": records(report.cache),
        "goals": records(goals(ratios, cache_frame(report), report.environment)),
        "browser": records(browser_summary(browser_runs(report.environment))),
    }
    files["results.json"].write_text(json.dumps(document, indent=1, default=str))

    fig = go.Figure()
    for path, rows in summary.groupby("path", sort=False):
        fig.add_trace(go.Scatter(
            x=rows["n"], y=rows["tokens_per_s_median"], mode="lines+markers", name=path,
            error_y={"type": "data", "symmetric": False,
                     "array": rows["tokens_per_s_max"] - rows["tokens_per_s_median"],
                     "arrayminus": rows["tokens_per_s_median"] - rows["tokens_per_s_min"]}))
    machine_text = report.environment.get("machine", {})
    fig.update_layout(
        title=f"Generated tokens per second against n (median, bars min-max; {report.settings.max_tokens} tokens "
              f"each; {machine_text.get('cpu', '')}, {machine_text.get('usable_cores', '?')} cores)",
        xaxis={"title": "n (samples per request)", "type": "log", "dtick": math.log10(2),
               "tickvals": sorted(summary["n"].unique())},
        yaxis_title="generated tokens / s", height=520)
    fig.write_html(files["tokens_per_s.html"], include_plotlyjs=True)
    return files


def cache_frame(report: Report) -> pd.DataFrame:
    """Every measured cache hit: the probe's, and the main runs' when their prompt spans blocks."""
    frames = [f for f in (report.cache, report.rows) if len(f) and "cache_hit" in f]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["path", "n", "cache_hit"])


def print_report(report: Report, files: dict[str, Path]) -> None:
    env = report.environment
    m = env.get("machine", {})
    kv = env.get("kv_cache", {})
    mem = env.get("memory_app", {})
    print(f"\nMachine: {m.get('cpu')}, {m.get('usable_cores')} cores ({m.get('simd')}), GPU {m.get('gpu')}; "
          f"vLLM {m.get('vllm')}, torch {m.get('torch')}, transformers {m.get('transformers')}")
    print(f"Load average (1 min) before/after: {env.get('load_before', [math.nan])[0]:.1f} / "
          f"{env.get('load_after', [math.nan])[0]:.1f}")
    s = report.settings
    print(f"Settings: n={list(s.ns)}, max_tokens={s.max_tokens} (ignore_eos), {s.repetitions} repetitions, "
          f"seed={s.seed}, temperature={s.temperature}, output_kind={s.output_kind}, "
          f"prompt {report.rows['prompt_tokens'].iloc[0] if len(report.rows) else '?'} tokens; "
          f"dtype vLLM {env.get('engine_dtype')}, HF {env.get('hf', {}).get('dtype')}")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        if len(report.rows):
            print("\nTokens per second (median of repetitions) and the paired ratio to native:")
            print(readable_table(report.summary, report.ratios).to_string(index=False, float_format=TWO_PLACES))
            print("\nGoal ratios (paired, per repetition):")
            print(ratio_summary(report.ratios).to_string(index=False, float_format=TWO_PLACES))
        cache = cache_frame(report).dropna(subset=["cache_hit"])
        if len(cache):
            print("\nPrefix cache, children 1..n-1 (cached tokens / block-aligned prompt tokens):")
            table = cache.groupby(["path", "n", "prompt_tokens", "aligned_prompt_tokens", "cache_source"])
            print(table[["children_cached_tokens", "cache_hit"]].median().reset_index()
                  .to_string(index=False, float_format=TWO_PLACES))
        print(f"\nMemory (engine + UI, before HF loaded): RSS {mem.get('rss_mib', math.nan):.0f} MiB, "
              f"PSS {mem.get('pss_mib', math.nan):.0f} MiB over {mem.get('processes')} processes"
              + (f"; with HF loaded: RSS {env['memory_with_hf']['rss_mib']:.0f} MiB" if "memory_with_hf" in env
                 else ""))
        if kv.get("blocks"):
            print(f"KV cache: {kv['blocks']} blocks x {kv['block_size']} = {kv['tokens']:,} tokens"
                  + (f", {kv['gib']:.2f} GiB" if kv.get("gib") else ""))
        if env.get("bundles"):
            print(f"\nRun bundle bytes per sampled token (Run.to_json, version {BUNDLE_VERSION}):")
            print(pd.DataFrame(env["bundles"]).to_string(index=False))
        print_app(env)
        print("\nGoals:")
        print(goals(report.ratios, cache_frame(report), env).to_string(index=False, float_format=TWO_PLACES))
    print("\nCaveats:\n" + "\n".join(f"- {c}" for c in caveats(report)))
    print("\nFiles: " + ", ".join(str(p) for p in files.values()))
    if report.interrupted:
        print("(interrupted: the figures cover what was measured before Ctrl-C)")


def print_app(env: dict[str, Any]) -> None:
    """The app as a person starts it: start, memory, and what the browser saw."""
    app = env.get("app")
    if not app:
        return
    if "error" in app:
        print(f"\npython app.py: {app['error']}")
        return
    memory = app.get("memory", {})
    once = "each page once" if memory.get("pages_counted_once") else "sum over processes"
    each = ", ".join(f"{name} {gib:.2f}" for name, gib in memory.get("rss_gib_by_process", {}).items())
    print(f"\npython app.py: answered after {app['start_s']:.1f} s; resident memory after the page's runs: "
          f"{memory.get('rss_gib', math.nan):.2f} GiB ({once}; sum of the processes' RSS "
          f"{memory.get('rss_sum_gib', math.nan):.2f}: {each}; PSS {memory.get('pss_gib', math.nan):.2f})")
    if app.get("browser"):
        print(f"Browser: {app['browser']}")
    summary = browser_summary(browser_runs(env))
    if len(summary):
        print("What the browser saw (headless Chromium; medians; the first run after start is its own row):")
        print(summary.to_string(index=False, float_format=TWO_PLACES))


def comparable(document: dict[str, Any]) -> dict[str, float]:
    """The figures of one results.json that another run can be set beside, by name."""
    figures: dict[str, float] = {}
    for row in document.get("summary", []):
        figures[f"{row['path']} tok/s, n={row['n']}"] = row.get("tokens_per_s_median")
    for row in document.get("browser", []):
        for name in ("first_visible_s", "updates_per_s", "longest_frame_gap_ms", "bytes_per_update", "heap_mb"):
            figures[f"page {row['run']} n={row['n']}: {name}"] = row.get(name)
    environment = document.get("environment", {})
    app = environment.get("app") or {}
    figures["app start_s"] = app.get("start_s")
    figures["app resident GiB"] = (app.get("memory") or {}).get("rss_gib")
    for bundle in environment.get("bundles") or []:
        top = ", top-k" if bundle.get("logprobs") else ""
        figures[f"bundle bytes/token, {bundle['output_kind']} n={bundle['n']}{top}"] = bundle.get("bytes_per_token")
    figures.update(document.get("figures") or {})  # named figures as they are (--paced, --cpu-per-token)
    return {name: float(value) for name, value in figures.items() if isinstance(value, int | float)}


def against_baseline(document: dict[str, Any], baseline: dict[str, Any]) -> pd.DataFrame:
    """Every figure both runs have: the baseline's, this run's, and this over the baseline."""
    now, before = comparable(document), comparable(baseline)
    rows = [{"figure": name, "baseline": before[name], "this run": value,
             "this/baseline": value / before[name] if before[name] else math.nan}
            for name, value in now.items() if name in before]
    return pd.DataFrame(rows, columns=["figure", "baseline", "this run", "this/baseline"])


def publish(report: Report, out: Path, label: str, baseline: Path | None = None) -> None:
    """Write the files, print the tables (beside a baseline run's, if given), and end stdout with
    the headline ratios."""
    files = write_results(report, out, label)
    print_report(report, files)
    if baseline is not None:
        table = against_baseline(json.loads(files["results.json"].read_text()), json.loads(baseline.read_text()))
        print(f"\nAgainst the baseline {baseline}:")
        with pd.option_context("display.width", 200, "display.max_colwidth", 60):
            print(table.to_string(index=False, float_format=TWO_PLACES) if len(table) else "(no figure in common)")
    if "total_s" in report.environment:
        print(f"Total time {report.environment['total_s']:.0f} s (after imports)")
    print(report.headline())
