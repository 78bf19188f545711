"""How a profile's stacks are named: a stack trie's node as the frames the view shows, root
first, and as report keys (a function, or a line, as the view groups them; a native
recording's frames the view leaves out skipped). Each answer is kept once made: a report asks
for the same stacks many times."""

from __future__ import annotations

from collections.abc import Iterable

from psrec.format import Definitions
from psrec.format import constants as C
from psrec.format.mixed_stacks import MARKER_KIND, hides

from .model import NO_STACK, TRUNCATED_KEY, Column, FrameKey

__all__ = ["StackNames"]


class StackNames:
    """The names of the stacks of one trie (parents, frames: a node's parent and innermost
    frame, by node) under a view's grouping (`by`: "function" or "line") and native frames
    (`native`, psrec.format.mixed_stacks.NATIVE_VIEWS)."""

    def __init__(self, defs: Definitions, parents: Column, frames: Column, by: str,
                 native: str) -> None:
        self.defs = defs
        self.parents = parents
        self.frames = frames
        self.by = by
        self.native = native
        self._stacks: dict[int, tuple[int, ...]] = {}
        self._keys: dict[int, FrameKey] = {}
        self._hidden: dict[int, bool] = {}
        self._node_keys: dict[int, tuple[FrameKey, ...]] = {}

    def stack(self, node: int) -> tuple[int, ...]:
        """Frame ids of a trie node's stack, root first: those the view shows (a native
        recording's frames the view leaves out are not there)."""
        s = self._stacks.get(node)
        if s is None:
            frames: list[int] = []
            n = node
            parents, fr = self.parents, self.frames
            while n:
                cached = self._stacks.get(n)
                if cached is not None:
                    frames.extend(reversed(cached))
                    break
                if not self.hidden(fr[n]):
                    frames.append(fr[n])
                n = parents[n]
            s = tuple(reversed(frames))
            self._stacks[node] = s
        return s

    def hidden(self, frame_id: int) -> bool:
        """Whether the view leaves this frame out (only a native recording's frames can be:
        psrec.format.mixed_stacks.hides)."""
        h = self._hidden.get(frame_id)
        if h is None:
            fn = self.defs.frame(frame_id).function if frame_id else None
            h = self._hidden[frame_id] = fn is not None and fn.kind != 0 and hides(
                fn.kind, fn.name, self.native)
        return h

    def key(self, frame_id: int) -> FrameKey:
        """The report key of a frame, by function or by line as the view asks."""
        k = self._keys.get(frame_id)
        if k is None:
            if frame_id == C.TRUNCATED_FRAME:
                k = TRUNCATED_KEY
            else:
                f = self.defs.frame(frame_id)
                fn = f.function
                # A native frame's line in the file is its pc's offset, no source line: by
                # line, it is its function's row still.
                line = f.line if self.by == "line" and fn.kind == 0 else fn.first_line
                k = FrameKey(fn.filename, line, fn.name, fn.kind != 0)
            self._keys[frame_id] = k
        return k

    def leaf(self, node: int) -> FrameKey:
        """The report key of a stack's innermost frame the view shows (NO_STACK for the empty
        stack)."""
        while node and self.hidden(self.frames[node]):
            node = self.parents[node]
        return self.key(self.frames[node]) if node else NO_STACK

    def keys(self, node: int) -> tuple[FrameKey, ...]:
        """Report keys of a stack, root first; the empty stack is NO_STACK."""
        cache = self._node_keys
        ks = cache.get(node)
        if ks is not None:
            return ks
        if node == 0:
            ks = cache[0] = (NO_STACK,)
            return ks
        # A stack is its parent's plus one frame: walk up to the nearest known stack only.
        # Only the stack asked for is kept: keeping every prefix on the way cost memory in
        # the square of the depth (270 MB for one stack 8192 frames deep).
        chain = []
        n = node
        parents, frames = self.parents, self.frames
        while n and n not in cache:
            if not self.hidden(frames[n]):
                chain.append(self.key(frames[n]))
            n = parents[n]
        base: tuple[FrameKey, ...] = cache[n] if n else ()
        if base == (NO_STACK,):  # a stack of frames the view leaves out, all of them
            base = ()
        chain.reverse()
        ks = base + tuple(chain)
        cache[node] = ks = ks or (NO_STACK,)
        return ks

    def marked(self, cells: Iterable[tuple[int, int]]) -> int:
        """The samples of (node, samples) cells whose stack holds the marker of native frames
        not captured (FUNCTION kind 4, spec section 10, rule 7), whatever the view shows of
        it."""
        marked: dict[int, bool] = {0: False}
        parents, frames, defs = self.parents, self.frames, self.defs

        def has(node: int) -> bool:
            path = []
            while node not in marked:
                path.append(node)
                node = parents[node]
            m = marked[node]
            for n in reversed(path):
                fid = frames[n]
                m = m or (fid != 0 and defs.frame(fid).function.kind == MARKER_KIND)
                marked[n] = m
            return m

        return sum(n for node, n in cells if has(node))
