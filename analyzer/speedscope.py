"""The speedscope exporter: one sampled profile per thread, one shared frame table.

Samples are in time order; consecutive samples of a thread with the same stack are merged into
one sample whose weight is their summed time, which speedscope draws identically.
"""

from __future__ import annotations

import json
from typing import IO, Any

from psrec.format.version import psrec_version

from .common import (
    SCHEMA_URL,
    SPEEDSCOPE_UNITS,
    WAITS,
    check_waits,
    raise_no_waits,
    speedscope_frame,
)
from .profile import FrameKey, Profile
from .registry import Option, Reporter, register
from .tasks import await_stacks

__all__ = ["SCHEMA_URL", "SpeedscopeExporter", "check_consistency"]

@register
class SpeedscopeExporter(Reporter):
    name = "speedscope"
    description = "speedscope JSON: one sampled profile per thread"
    command = "export"
    flag = Option(("--speedscope",), help="speedscope JSON (default RECORDING.speedscope.json): "
                                          "one sampled profile per thread, samples in time "
                                          "order. The default format.")
    reads = (WAITS,)
    suffix = ".speedscope.json"
    needs_timelines = True

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        waits = _waits(profile) if self.options.get("waits") else None
        timelines = profile.timelines
        assert timelines is not None
        unit = SPEEDSCOPE_UNITS.get(profile.tick_ns, "nanoseconds")
        scale = 1 if profile.tick_ns in SPEEDSCOPE_UNITS else profile.tick_ns
        if profile.view.weights == "count":
            kind = "count"
        elif profile.cpu_weighted:
            kind = "cpu"
        else:
            kind = "weight"
        top = {
            "$schema": SCHEMA_URL,
            "name": f"{profile.path} (mode {profile.view.mode})",
            "activeProfileIndex": 0,
            "exporter": f"psrec {psrec_version()}",
        }
        # Written as it is computed, profiles first and the frame table last (JSON key order
        # is free), so that memory holds one thread's timeline, not the whole document.
        out.write(json.dumps(top)[:-1] + ', "profiles": [')
        refs = sorted(timelines, key=lambda r: (profile.threads[r].start_ts
                                                if r in profile.threads else 0, r))
        text = profile.walks.speedscope_text()
        nprofiles = total_samples = 0
        for ref in refs:
            text.set_thread(timelines[ref], kind, profile.interval_ticks, scale)
            if not text.kept:  # no run of this thread stands for any time
                continue
            total_samples += text.samples
            head = json.dumps({
                "type": "sampled",
                "name": profile.thread_label(ref),
                "unit": unit,
                "startValue": text.start,
                "endValue": text.start + text.total,
            })
            out.write((",\n" if nprofiles else "") + head[:-1] + ', "samples": [')
            while chunk := text.samples_chunk(_CHUNK):
                out.write(chunk)
            out.write('], "weights": [')
            while chunk := text.weights_chunk(_CHUNK):
                out.write(chunk)
            out.write("]}")
            nprofiles += 1
        keys = list(text.frame_keys())
        said = ""
        if waits is not None:
            said = _write_waits(waits, out, keys, unit, scale, nprofiles)
            nprofiles += 1
        frames = [speedscope_frame(k) for k in keys]
        out.write('], "shared": {"frames": ')
        out.write(json.dumps(frames))
        out.write("}}\n")
        return (f"{nprofiles} thread profiles, {len(frames):,} frames, "
                f"{total_samples:,} samples{said}")


_CHUNK = 1 << 20
WAITS_PROFILE = "asyncio tasks waiting"


def _waits(profile: Profile) -> tuple[list[tuple[list[FrameKey], int]], bool]:
    """--waits: the tasks' waiting time by logical stack down to the await
    (tasks.await_stacks), as (report keys root first, ticks); and whether the budget of
    logical nodes cut them short. Raises SelectionError where no task waited."""
    check_waits(profile)
    logical, ticks, cut = await_stacks(profile)
    if not ticks:
        raise_no_waits(profile)
    return [([profile.names.key(f) for f in logical.path(node) if not profile.names.hidden(f)], n)
            for node, n in sorted(ticks.items())], cut


def _write_waits(waits: tuple[list[tuple[list[FrameKey], int]], bool], out: IO[Any],
                 keys: list[FrameKey], unit: str, scale: int, written: int) -> str:
    """One more sampled profile, of the tasks' waiting time: a sample per stack weighing its
    time; its frames are added to keys. Returns what the summary says of it."""
    stacks, cut = waits
    index = {k: i for i, k in enumerate(keys)}
    samples, weights = [], []
    for stack_keys, n in stacks:
        stack = []
        for k in stack_keys:
            i = index.get(k)
            if i is None:
                i = index[k] = len(keys)
                keys.append(k)
            stack.append(i)
        samples.append(stack)
        weights.append(n * scale)
    head = json.dumps({"type": "sampled", "name": WAITS_PROFILE, "unit": unit,
                       "startValue": 0, "endValue": sum(weights)})
    out.write((",\n" if written else "") + head[:-1] + ', "samples": ')
    out.write(json.dumps(samples) + ', "weights": ' + json.dumps(weights) + "}")
    note = ", cut at the budget of frames of logical stacks" if cut else ""
    return f"; {WAITS_PROFILE}: {len(samples):,} stacks{note}"


def check_consistency(doc: dict[str, Any]) -> list[str]:
    """What the schema cannot say: frame indices in range, samples and weights of equal length,
    non-negative weights, and endValue - startValue equal to the weights' sum."""
    problems = []
    nframes = len(doc["shared"]["frames"])
    for p in doc["profiles"]:
        name = p.get("name")
        if p["type"] != "sampled":
            continue
        if len(p["samples"]) != len(p["weights"]):
            problems.append(f"{name}: {len(p['samples'])} samples but {len(p['weights'])} weights")
        for s in p["samples"]:
            if any(not (0 <= i < nframes) or int(i) != i for i in s):
                problems.append(f"{name}: frame index out of range in {s}")
                break
        if any(w < 0 for w in p["weights"]):
            problems.append(f"{name}: negative weight")
        if abs((p["endValue"] - p["startValue"]) - sum(p["weights"])) > 1e-6:
            problems.append(f"{name}: endValue - startValue differs from the sum of weights")
    return problems
