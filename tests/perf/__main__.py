"""psrec's benchmark against py-spy and Austin: `python -m tests.perf [--quick] [--only ...]`.

Prints a Markdown table on stdout (progress goes to stderr) and writes every raw run to
bench-results/latest.json; with --page, also the page docs/performance.md from it.
`--page PATH --from RESULTS.json` writes the page from saved results and runs nothing.
See tests/perf/README.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import shutil
import socket
import sys
import tempfile
import time
from typing import Any

from . import _proc
from ._depth import fig_depth
from ._figures import (
    Ctx,
    fig_attribution,
    fig_dump,
    fig_fidelity,
    fig_memory,
    fig_rate,
    fig_size,
)
from ._fleet import fig_fleet
from ._keep import fig_keep
from ._many_tasks import fig_many_tasks
from ._native import fig_native
from ._page import write_page
from ._report import render_table
from ._startup import fig_startup
from ._synth import fig_analyzer, fig_format
from ._tasks import fig_tasks
from ._threads import fig_threads
from ._tools import _version, ensure_tools, tachyon_version, target_pythons
from ._windows import fig_slowdown

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIGURES = ("rate", "fidelity", "slowdown", "size", "attribution", "analyzer", "memory", "format",
           "dump", "native", "depth", "tasks", "keep", "fleet", "threads", "many_tasks",
           "startup")
LIVE = {"rate", "fidelity", "slowdown", "size", "attribution", "memory", "dump", "native",
        "depth", "tasks", "keep", "many_tasks", "startup"}


def _log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def _loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _native_builds() -> dict[str, str]:
    """Which native modules of psrec this run used, and when they were built."""
    import importlib.util

    out = {}
    for mod in ("psrec.format._format", "psrec.recorder._recorder"):
        try:
            spec = importlib.util.find_spec(mod)
            path = (spec.origin if spec else None) or "?"
            built = dt.datetime.fromtimestamp(os.path.getmtime(path), dt.timezone.utc)
            out[mod] = f"{path} (built {built.isoformat(timespec='seconds')})"
        except (ImportError, OSError) as exc:
            out[mod] = f"not available: {exc}"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.perf", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="a smoke run: fewer and shorter runs")
    ap.add_argument("--only", default="", help=f"comma-separated figures: {','.join(FIGURES)}")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-results", "latest.json"),
                    help="where the JSON with every raw run goes")
    ap.add_argument("--venv", default=os.path.join(ROOT, "build", "bench-venv"),
                    help="the environment that holds py-spy and Austin (created when missing)")
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "bench-data"),
                    help="where synthetic recordings are kept between runs")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--pythons", default="3.11",
                    help="comma-separated target interpreters for the live figures: 3.11 "
                         "(pyenv's 3.11.7), 3.8-3.13 (pyenv's newest of each), 3.14, 3.15, "
                         "3.14t (tests/interpreters/provision); with more than one, each row "
                         "names its target")
    ap.add_argument("--depth-pythons", default="",
                    help="comma-separated target interpreters for figure S (deep stacks) alone, "
                         "as --pythons names them (default: those of --pythons)")
    ap.add_argument("--page", metavar="PATH",
                    help="also write the performance page (docs/performance.md) from the results")
    ap.add_argument("--from", dest="from_", metavar="RESULTS", action="append", default=[],
                    help="with --page: write the page from these saved results (repeatable; "
                         "each figure from the latest run that has it) and run nothing")
    args = ap.parse_args(argv)
    if args.from_:
        if not args.page:
            ap.error("--from needs --page")
        try:
            command = write_page(args.page, args.from_)
        except (OSError, ValueError, KeyError) as exc:
            ap.exit(1, f"bench: cannot write {args.page}: {exc}\n")
        _log(f"wrote {args.page} ({command})")
        return 0
    only = [f.strip() for f in args.only.split(",") if f.strip()] or list(FIGURES)
    unknown = [f for f in only if f not in FIGURES]
    if unknown:
        ap.error(f"unknown figure(s) {', '.join(unknown)}; choose from {', '.join(FIGURES)}")

    _proc.install_signal_handlers()
    started = time.monotonic()
    load_start = _loadavg()
    builds_start = _native_builds()
    tc = ensure_tools(args.venv, _log)
    main_ids = [p.strip() for p in args.pythons.split(",") if p.strip()]
    depth_ids = [p.strip() for p in args.depth_pythons.split(",") if p.strip()] or main_ids
    pythons = target_pythons(main_ids + [p for p in depth_ids if p not in main_ids])
    targets = {}
    for ident, path in pythons.items():
        version = _version([path, "--version"]) or "?"
        targets[ident] = dataclasses.replace(tc, target_python=path, target_version=version,
                                             tachyon_version=tachyon_version(path, version))
    tc = next(iter(targets.values()))
    _log(f"target python {tc.target_version} ({tc.target_python}); py-spy {tc.py_spy_version}; "
         f"austin {tc.austin_version}; psrec {tc.psrec_version} "
         f"(record: {'yes' if tc.psrec_record else 'not available yet'}); Tachyon: "
         + (", ".join(f"{i} {t.tachyon_version}" for i, t in targets.items() if t.tachyon_version)
            or "none (its targets are CPython 3.15 and later)"))
    workdir = tempfile.mkdtemp(prefix="psrec-bench-")
    ctx = Ctx(tc, workdir, args.quick, _log)
    if not tc.psrec_record:
        ctx.unavailable["psrec"] = "not available yet"
    if tc.py_spy is None:
        ctx.unavailable["py-spy"] = "not installed"
    if tc.austin is None:
        ctx.unavailable["austin"] = "not installed"
    timings: dict[str, float] = {}
    failures: dict[str, str] = {}
    status = 0
    # The live figures run once per target interpreter, the others once.
    raw_by_target: dict[str, dict[str, Any]] = {}
    def planned(ident: str, fig: str) -> bool:
        if fig == "depth":
            return ident in depth_ids
        return ident in main_ids and (fig in LIVE or ident == next(iter(targets)))

    plan = [(ident, fig) for ident in targets for fig in FIGURES
            if fig in only and planned(ident, fig)]
    try:
        for ident, fig in plan:
            ctx.tc = targets[ident]
            ctx.label = ident if len(targets) > 1 and fig in LIVE else ""
            ctx.raw = raw_by_target.setdefault(ident, {})
            t0 = time.monotonic()
            try:
                if fig == "rate":
                    fig_rate(ctx)
                elif fig == "fidelity":
                    fig_fidelity(ctx)
                elif fig == "slowdown":
                    fig_slowdown(ctx)
                elif fig == "attribution":
                    fig_attribution(ctx)
                elif fig == "size":
                    fig_size(ctx)
                elif fig == "analyzer":
                    fig_analyzer(ctx, args.cache)
                elif fig == "memory":
                    fig_memory(ctx)
                elif fig == "format":
                    fig_format(ctx, args.cache)
                elif fig == "dump":
                    fig_dump(ctx)
                elif fig == "native":
                    fig_native(ctx)
                elif fig == "depth":
                    fig_depth(ctx)
                elif fig == "tasks":
                    fig_tasks(ctx)
                elif fig == "keep":
                    fig_keep(ctx, args.cache)
                elif fig == "fleet":
                    fig_fleet(ctx, args.cache)
                elif fig == "threads":
                    fig_threads(ctx, args.cache)
                elif fig == "many_tasks":
                    fig_many_tasks(ctx)
                elif fig == "startup":
                    fig_startup(ctx)
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # noqa: BLE001 - one figure failing does not stop the rest
                import traceback

                failures[f"{fig}@{ident}"] = f"{type(exc).__name__}: {exc}"
                _log(f"figure {fig} on {ident} failed: {failures[f'{fig}@{ident}']}")
                traceback.print_exc(file=sys.stderr)
                status = 1
            finally:
                _proc.cleanup_all()
            key = f"{fig}@{ident}" if len(targets) > 1 and fig in LIVE else fig
            timings[key] = round(time.monotonic() - t0, 1)
            _log(f"{key}: {timings[key]:.0f} s")
    except KeyboardInterrupt:
        _log("interrupted: stopping every process started")
        _proc.cleanup_all()
        status = 130
    finally:
        _proc.cleanup_all()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    meta: dict[str, Any] = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "machine": f"{platform.system()} {platform.release()} {platform.machine()}, "
                   f"{os.cpu_count()} CPUs",
        "loadavg_start": load_start,
        "loadavg_end": _loadavg(),
        "command": "python -m tests.perf" + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else ""),
        "quick": args.quick,
        "figures": only,
        "seconds": round(time.monotonic() - started, 1),
        "seconds_per_figure": timings,
        "failures": failures,
        "tools": tc.as_dict(),
        "targets": {ident: f"{t.target_version} ({t.target_python})"
                    for ident, t in targets.items()},
        "psrec_native": _native_builds(),
        "psrec_native_at_start": builds_start,
    }
    unavailable = dict(ctx.unavailable)
    table = render_table(ctx.rows, unavailable)
    header = (
        f"psrec benchmark, finished {meta['date']} on {meta['host']} ({meta['machine']}); "
        f"load average {load_start} at start, {meta['loadavg_end']} at end; "
        f"{meta['seconds']:.0f} s{' (--quick)' if args.quick else ''}.\n"
        f"Targets: {', '.join(t.target_version for t in targets.values())}. "
        f"Tools: psrec {tc.psrec_version}"
        f"{'' if tc.psrec_record else ' (record: not available yet)'}, "
        f"py-spy {tc.py_spy_version}, Austin {tc.austin_version}.\n"
        "Each cell: median [min–max] over the runs; psrec ÷ best peer compares medians.\n"
    )
    notes = [f"- {n}" for n in tc.notes]
    if builds_start != meta["psrec_native"]:
        notes.append("- psrec's native modules were rebuilt during this run: figures run before "
                     f"and after used different builds ({meta['psrec_native']})")
    notes += [f"- figure {k} failed: {v}" for k, v in failures.items()]
    notes += [f"- {t}: {why}" for t, why in unavailable.items()]
    print(header)
    print(table)
    if notes:
        print("\n" + "\n".join(notes))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    raw = raw_by_target if len(targets) > 1 else next(iter(raw_by_target.values()), {})
    doc = {"meta": meta, "rows": [r.as_dict() for r in ctx.rows], "raw": raw}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    md = os.path.splitext(args.out)[0] + ".md"
    with open(md, "w") as f:
        f.write(header + "\n" + table + ("\n\n" + "\n".join(notes) if notes else "") + "\n")
    _log(f"wrote {args.out} and {md} ({meta['seconds']:.0f} s)")
    if args.page:
        write_page(args.page, [args.out])
        _log(f"wrote {args.page}")
    return status


if __name__ == "__main__":
    sys.exit(main())
