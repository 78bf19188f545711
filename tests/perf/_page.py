"""docs/performance.md, written from the JSON of one or more benchmark runs.

`python -m tests.perf --page docs/performance.md --from RESULTS.json [--from MORE.json]` writes
the page from saved results without running anything; `python -m tests.perf ... --page PATH`
writes it at the end of a run from that run's results. Each figure is taken from the latest
run that has it; its rows show psrec and every peer the run measured side by side, with the
ratio to the best peer, the target and whether it was met, under the run's date, machine and
command.

A page may end in a section of figures pasted by hand before the page was generated (its first
line is ``PASTED_MARK``): rendering keeps it, below the generated figures, until the results
cover every figure of the benchmark, and then leaves it out.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import Any

from ._report import PEERS, Summary, fmt_num, fmt_summary

__all__ = ["FIGURES", "PASTED_MARK", "load_results", "render_page", "write_page"]

# Every figure of the benchmark, by the letter its rows carry, in the order the page gives
# them; tests/perf/README.md says how each is measured. "F" is both the format figure and the
# fleet figure (`--only format`, `--only fleet`).
FIGURES = {
    "1": "Highest rate, CPU per sample, failed samples",
    "2": "Rate fidelity",
    "3": "Target slowdown",
    "4": "Output bytes per thread-sample",
    "5": "Attribution",
    "6": "Analyzer: reading large recordings",
    "7": "Recorder memory",
    "F": "Format and fleet",
    "D": "Dump of a live process",
    "N": "Native frames",
    "S": "Deep stacks",
    "T": "asyncio tasks",
    "A": "asyncio at scale",
    "K": "Flight recorder",
    "M": "Many threads",
}

PASTED_MARK = "<!-- last pasted figures: kept by the renderer until a run covers every figure -->"

TOOL_NAMES = {"psrec": "psrec", "py-spy": "py-spy", "austin": "Austin", "tachyon": "Tachyon"}


def load_results(paths: Iterable[str]) -> list[dict[str, Any]]:
    """The results documents (`{"meta": ..., "rows": [...]}`) saved by `--out`."""
    docs = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or "meta" not in doc or "rows" not in doc:
            raise ValueError(f"{path}: not a benchmark results file (no meta and rows)")
        docs.append(doc)
    return docs


def _summary(d: dict[str, Any] | None) -> Summary | None:
    if not d:
        return None
    return Summary(float(d["median"]), float(d["min"]), float(d["max"]), int(d["n"]))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _date(meta: dict[str, Any]) -> str:
    d = str(meta.get("date", "?"))
    return d.replace("T", " ").replace("+00:00", " UTC")


def _duration(meta: dict[str, Any]) -> str:
    s = meta.get("seconds")
    if not isinstance(s, (int, float)):
        return "?"
    return f"{s:.0f} s" if s < 600 else f"{s / 60:.0f} min"


def _tools(meta: dict[str, Any]) -> str:
    t = meta.get("tools") or {}
    parts = [f"psrec {t.get('psrec_version', '?')}"]
    if t.get("py_spy_version"):
        parts.append(f"py-spy {t['py_spy_version']}")
    if t.get("austin_version"):
        parts.append(f"Austin {t['austin_version']}")
    if t.get("tachyon_version"):
        parts.append(f"Tachyon {t['tachyon_version']}")
    return ", ".join(parts)


def _columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """psrec, the peers the rows measured in the usual order, then any other column (a psrec
    variant such as `psrec --no-tasks`)."""
    seen: list[str] = []
    for r in rows:
        for tool, v in (r.get("values") or {}).items():
            if v is not None and tool not in seen:
                seen.append(tool)
    order = ["psrec", *PEERS]
    return [t for t in order if t in seen] + [t for t in seen if t not in order]


def _figure_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    cols = _columns(rows)
    has_ratio = any(r.get("ratio_psrec_to_best_peer") is not None for r in rows)
    has_target = any(r.get("target") for r in rows)
    head = ["measure", "unit", *(TOOL_NAMES.get(c, c) for c in cols)]
    if has_ratio:
        head.append("psrec ÷ best peer")
    if has_target:
        head += ["target (psrec)", "met"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        measure = r["measure"] + (f" ({r['note']})" if r.get("note") else "")
        cells = [_cell(measure), _cell(r.get("unit", ""))]
        values = r.get("values") or {}
        cells += [fmt_summary(_summary(values.get(c))) for c in cols]
        if has_ratio:
            ratio = r.get("ratio_psrec_to_best_peer")
            peer = r.get("best_peer")
            cells.append(f"{fmt_num(ratio)}× ({TOOL_NAMES.get(peer, peer)})"
                         if ratio is not None and peer else "—")
        if has_target:
            met = {True: "met", False: "**not met**", None: "—" if not r.get("target")
                   else "n/a"}[r.get("met")]
            cells += [_cell(r.get("target") or "—"), met]
        out.append("| " + " | ".join(cells) + " |")
    return out


def render_page(docs: Sequence[dict[str, Any]], command: str, pasted: str | None = None) -> str:
    """The page's Markdown. `command` is the command line that writes it; `pasted`, a section
    of hand-pasted figures (starting with PASTED_MARK) kept until every figure is covered."""
    # Each figure from the latest run that has it.
    order = sorted(range(len(docs)), key=lambda i: str(docs[i]["meta"].get("date", "")))
    runs = {i: f"run {n + 1}" for n, i in enumerate(order)}  # numbered by date
    source: dict[str, int] = {}
    for i in order:
        for r in docs[i]["rows"]:
            source[r["figure"]] = i
    figures = [f for f in FIGURES if f in source] + sorted(f for f in source if f not in FIGURES)

    out = [
        "# Performance",
        "",
        "<!-- Written by the benchmark (tests/perf/_page.py): edit the renderer, not this "
        "page. -->",
        "",
        "psrec against py-spy, Austin and, on CPython 3.15 targets, CPython's own sampler",
        "(Tachyon), on the same workloads and the same machine in the same run. This page is",
        "written by the benchmark from the results it saves; to make it again:",
        "",
        "```",
        command,
        "```",
        "",
        "`python -m tests.perf --page docs/performance.md` writes it at the end of a run, from",
        "that run. How each figure is measured, and how each tool counts its samples, is in",
        "[tests/perf/README.md](../tests/perf/README.md). Each cell is the median [min–max] over",
        "the runs; \"psrec ÷ best peer\" compares medians (absolute values for errors).",
        "",
        "## Runs",
        "",
        "| run | finished | machine | load average (start, end) | took | targets | tools "
        "| command |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i in order:
        m = docs[i]["meta"]
        load = f"{(m.get('loadavg_start') or ['?'])[0]}, {(m.get('loadavg_end') or ['?'])[0]}"
        targets = ", ".join(str(t).split(" (")[0] for t in (m.get("targets") or {}).values())
        took = _duration(m) + (" (`--quick`: a smoke run)" if m.get("quick") else "")
        out.append(f"| {runs[i]} | {_date(m)} | {_cell(str(m.get('machine', '?')))} | "
                   f"{load} | {took} | {targets or '?'} | {_tools(m)} | "
                   f"`{_cell(str(m.get('command', '?')))}` |")
    notes = []
    for i in order:
        m = docs[i]["meta"]
        for name, why in (m.get("failures") or {}).items():
            notes.append(f"- {runs[i]}: figure {name} failed: {why}")
        for note in (m.get("tools") or {}).get("notes") or []:
            notes.append(f"- {runs[i]}: {note}")
    if notes:
        out += ["", *notes]
    missing = [f"{f} ({t[0].lower() + t[1:]})" for f, t in FIGURES.items() if f not in source]
    if missing:
        out += ["", "Not in these results: " + ", ".join(missing) + "."]

    for f in figures:
        i = source[f]
        m = docs[i]["meta"]
        rows = [r for r in docs[i]["rows"] if r["figure"] == f]
        out += ["", f"## {f}: {FIGURES.get(f, 'figure ' + f)}", "",
                f"From {runs[i]} ({_date(m)}, {m.get('machine', '?')}):", ""]
        out += _figure_table(rows)

    if pasted and missing:
        out += ["", pasted.strip()]
    return "\n".join(out) + "\n"


def _pasted_section(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    at = text.find(PASTED_MARK)
    return text[at:] if at >= 0 else None


def write_page(path: str, result_paths: Sequence[str]) -> str:
    """Render `path` from the results files, keeping its pasted section (see the module's
    docstring); returns the command line that makes it again."""
    docs = load_results(result_paths)
    command = "python -m tests.perf --page " + path + "".join(
        f" --from {p}" for p in result_paths)
    text = render_page(docs, command, _pasted_section(path))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    return command
