"""The speedscope exporter: one sampled profile per thread, one shared frame table.

Samples are in time order; consecutive samples of a thread with the same stack are merged into
one sample whose weight is their summed time, which speedscope draws identically.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable
from typing import IO, Any

from psrec import __version__

from . import engine
from .profile import FrameKey, Profile, Runs
from .registry import Reporter, register

__all__ = ["SCHEMA_URL", "SpeedscopeExporter", "check_consistency"]

SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"

_UNITS = {1: "nanoseconds", 1000: "microseconds", 1_000_000: "milliseconds",
          1_000_000_000: "seconds"}


@register
class SpeedscopeExporter(Reporter):
    name = "speedscope"
    description = "speedscope JSON: one sampled profile per thread"
    command = "export"
    suffix = ".speedscope.json"
    needs_timelines = True

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        assert profile.timelines is not None
        unit = _UNITS.get(profile.tick_ns, "nanoseconds")
        scale = 1 if profile.tick_ns in _UNITS else profile.tick_ns
        frame_index: dict[FrameKey, int] = {}
        frames: list[dict[str, Any]] = []

        def node_json(node: int) -> str:
            """A stack's frame indices; frames are numbered in order of first use."""
            idx = []
            for k in profile.keys(node):
                i = frame_index.get(k)
                if i is None:
                    i = frame_index[k] = len(frames)
                    frames.append(_frame(k))
                idx.append(i)
            return "[" + ",".join(map(str, idx)) + "]"

        top = {
            "$schema": SCHEMA_URL,
            "name": f"{profile.path} (mode {profile.view.mode})",
            "activeProfileIndex": 0,
            "exporter": f"psrec {__version__}",
        }
        # Written as it is computed, profiles first and the frame table last (JSON key order
        # is free), so that memory holds one thread's timeline, not the whole document.
        out.write(json.dumps(top)[:-1] + ', "profiles": [')
        refs = sorted(profile.timelines, key=lambda r: (profile.threads[r].start_ts
                                                        if r in profile.threads else 0, r))
        native = profile.stack_keys()
        if native is not None:
            frames, nprofiles, total_samples = _write_profiles_native(
                profile, refs, native[0], native[1], unit, scale, out)
        else:
            nprofiles, total_samples = self._write_profiles(profile, refs, unit, scale, out,
                                                            node_json)
        out.write('], "shared": {"frames": ')
        out.write(json.dumps(frames))
        out.write("}}\n")
        return (f"{nprofiles} thread profiles, {len(frames):,} frames, "
                f"{total_samples:,} samples")

    @staticmethod
    def _write_profiles(profile: Profile, refs: list[int], unit: str, scale: int, out: IO[Any],
                        node_json: Callable[[int], str]) -> tuple[int, int]:
        """The profiles array's items, in Python (where the native codec is absent)."""
        timelines = profile.timelines
        assert timelines is not None
        stack_json: dict[int, str] = {}

        def node_text(node: int) -> str:
            s = stack_json.get(node)
            if s is None:
                s = stack_json[node] = node_json(node)
            return s

        nprofiles = total_samples = 0
        for ref in refs:
            runs = timelines[ref]
            distinct = dict.fromkeys(runs.node)  # frames numbered in order of first use
            canon_of: dict[str, int] = {}
            canon = {n: canon_of.setdefault(node_text(n), n) for n in distinct}
            if len(canon_of) != len(distinct):
                # Some stacks render alike (lines of one function, grouped by function):
                # merge consecutive runs of those.
                runs = _merge(runs, canon)
            if profile.view.weights == "count":
                iv = profile.interval_ticks
                values = [c * iv for c in runs.count]
            elif profile.cpu_weighted:
                values = list(runs.cpu)
            else:
                values = list(runs.weight)
            nodes: Any = runs.node
            if 0 in values:  # runs that stand for no time (no CPU used) are left out
                keep = [i for i, v in enumerate(values) if v > 0]
                nodes = [nodes[i] for i in keep]
                values = [values[i] for i in keep]
            stacks = list(map(stack_json.__getitem__, nodes))
            weights = values
            if not stacks:
                continue
            if scale != 1:
                weights = [v * scale for v in weights]
            total = sum(weights)
            # The profile spans the time its samples stand for, ending at its last sample.
            start = max(0, (runs.first_ts[0] - runs.weight[0]) * scale)
            total_samples += sum(runs.count)
            head = json.dumps({
                "type": "sampled",
                "name": profile.thread_label(ref),
                "unit": unit,
                "startValue": start,
                "endValue": start + total,
            })
            out.write((",\n" if nprofiles else "") + head[:-1] + ', "samples": [')
            _write_joined(out, stacks)
            out.write('], "weights": [')
            _write_joined(out, list(map(str, weights)))
            out.write("]}")
            nprofiles += 1
        return nprofiles, total_samples


def _write_profiles_native(profile: Profile, refs: list[int], sk: Any, key_list: list[FrameKey],
                           unit: str, scale: int, out: IO[Any]
                           ) -> tuple[list[dict[str, Any]], int, int]:
    """The profiles array's items, their text made natively in pieces of bounded size;
    returns the frame table, the number of profiles and of samples."""
    assert profile.timelines is not None
    text = engine.native().SpeedscopeText(sk)
    if profile.view.weights == "count":
        kind = "count"
    elif profile.cpu_weighted:
        kind = "cpu"
    else:
        kind = "weight"
    nprofiles = total_samples = 0
    for ref in refs:
        runs = profile.timelines[ref]
        text.set_thread(runs.node, runs.count, runs.weight, runs.cpu, runs.first_ts, kind,
                        profile.interval_ticks, scale)
        if not text.kept:
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
    frames = [_frame(key_list[k]) for k in text.keys_in_order()]
    return frames, nprofiles, total_samples


_CHUNK = 1 << 20


def _frame(k: FrameKey) -> dict[str, Any]:
    f: dict[str, Any] = {"name": k.name, "file": k.filename}
    if k.line > 0:
        f["line"] = k.line
    return f


def _merge(runs: Runs, canon: dict[int, int]) -> Runs:
    """Runs with consecutive runs of the same canonical node merged into one."""
    node, count, weight, cpu, first_ts = (array("I"), array("I"), array("Q"), array("Q"),
                                          array("q"))
    prev = -1
    for i, n in enumerate(runs.node):
        c = canon[n]
        if c == prev:
            count[-1] += runs.count[i]
            weight[-1] += runs.weight[i]
            cpu[-1] += runs.cpu[i]
            continue
        node.append(n)
        count.append(runs.count[i])
        weight.append(runs.weight[i])
        cpu.append(runs.cpu[i])
        first_ts.append(runs.first_ts[i])
        prev = c
    return Runs(node, count, weight, cpu, first_ts)


def _write_joined(out: IO[Any], items: list[str], block: int = 1 << 16) -> None:
    for i in range(0, len(items), block):
        if i:
            out.write(",")
        out.write(",".join(items[i:i + block]))


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
