"""The speedscope exporter: one sampled profile per thread, one shared frame table.

Samples are in time order; consecutive samples of a thread with the same stack are merged into
one sample whose weight is their summed time, which speedscope draws identically.
"""

from __future__ import annotations

import json
from typing import IO, Any

from psrec import __version__

from .profile import FrameKey, Profile
from .registry import Reporter, register

__all__ = ["SCHEMA_URL", "SpeedscopeExporter", "check_consistency"]

SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"

_UNITS = {1: "nanoseconds", 1000: "microseconds", 1_000_000: "milliseconds",
          1_000_000_000: "seconds"}


@register
class SpeedscopeExporter(Reporter):
    name = "speedscope"
    description = "speedscope JSON: one sampled profile per thread"
    suffix = ".speedscope.json"
    needs_timelines = True

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        assert profile.timelines is not None
        unit = _UNITS.get(profile.tick_ns, "nanoseconds")
        scale = 1 if profile.tick_ns in _UNITS else profile.tick_ns
        frame_index: dict[FrameKey, int] = {}
        frames: list[dict[str, Any]] = []
        stack_json: dict[int, str] = {}

        def node_json(node: int) -> str:
            s = stack_json.get(node)
            if s is None:
                idx = []
                for k in profile.keys(node):
                    i = frame_index.get(k)
                    if i is None:
                        i = frame_index[k] = len(frames)
                        f: dict[str, Any] = {"name": k.name, "file": k.filename}
                        if k.line > 0:
                            f["line"] = k.line
                        frames.append(f)
                    idx.append(i)
                s = stack_json[node] = "[" + ",".join(map(str, idx)) + "]"
            return s

        profiles: list[str] = []
        total_samples = 0
        refs = sorted(profile.timelines, key=lambda r: (profile.threads[r].start_ts
                                                        if r in profile.threads else 0, r))
        for ref in refs:
            runs = profile.timelines[ref]
            if profile.view.weights == "count":
                iv = profile.interval_ticks
                values = [c * iv for c in runs.count]
            elif profile.cpu_weighted:
                values = list(runs.cpu)
            else:
                values = list(runs.weight)
            keep = [i for i, v in enumerate(values) if v > 0]
            if len(keep) != len(values):
                nodes = [runs.node[i] for i in keep]
                values = [values[i] for i in keep]
            else:
                nodes = list(runs.node)
            if not nodes:
                continue
            if scale != 1:
                values = [v * scale for v in values]
            total = sum(values)
            # The profile spans the time its samples stand for, ending at its last sample.
            start = max(0, (runs.first_ts[0] - runs.weight[0]) * scale)
            total_samples += sum(runs.count)
            samples = ",".join(node_json(n) for n in nodes)
            weights = ",".join(map(str, values))
            head = json.dumps({
                "type": "sampled",
                "name": profile.thread_label(ref),
                "unit": unit,
                "startValue": start,
                "endValue": start + total,
            })
            profiles.append(f'{head[:-1]}, "samples": [{samples}], "weights": [{weights}]}}')

        top = {
            "$schema": SCHEMA_URL,
            "name": f"{profile.path} (mode {profile.view.mode})",
            "activeProfileIndex": 0,
            "exporter": f"psrec {__version__}",
        }
        out.write(json.dumps(top)[:-1])
        out.write(', "shared": {"frames": ')
        out.write(json.dumps(frames))
        out.write('}, "profiles": [')
        out.write(",\n".join(profiles))
        out.write("]}\n")
        return (f"{len(profiles)} thread profiles, {len(frames):,} frames, "
                f"{total_samples:,} samples")


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
