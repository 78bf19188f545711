// psrec's HTML report: draws the page's data (psrec.analyzer.page.page_data). Everything the
// viewer picks (mode, window, threads, zoom, search) lives in the address's #fragment, so a
// view can be linked to and reloaded; every control only changes the fragment.
// Over 400 lines and kept whole: the page ships as one inline script with no build step and
// no modules, so its parts (fragment, rows, flame graph, table) share one closure.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("psrec-data").textContent);
  const $ = (sel) => document.querySelector(sel);
  const C = D.cells, P = D.parent, K = D.key, N = C.n.length;
  // A recording that cannot know GIL waits (before 3.15, or free-threaded) shows no wait
  // state at all: gil_wait_unknown says why, once, under the legend.
  const WAIT_KNOWN = D.gil_wait_unknown === null;
  const STATES = [["gil", D.free_threaded ? "attached (no GIL: free-threaded)" : "running, holding the GIL"],
                  ["cpu", "on a CPU without the GIL"],
                  ["wait", "waiting for the GIL"],
                  ["idle", "off the CPU"]].filter(([n]) => WAIT_KNOWN || n !== "wait");
  const LABEL = Object.fromEntries(STATES);
  const LABEL_W = 260;
  // A native recording's views of its native frames (none: only its Python frames; all:
  // every frame; mixed: native code between the Python frames, without the evaluation loop
  // and the call machinery, and a stack's frames below its first Python frame as one).
  const NATIVE_VIEWS = ["python", "mixed", "all"];
  const NATIVE_HELP = {
    python: "Python frames only",
    mixed: "Python frames and the native code they call, without the interpreter's evaluation loop and call machinery; the start-up frames below the first Python frame folded into one",
    all: "every frame, the interpreter's own included",
  };
  // Per trie node (parents come before their children): whether it or a frame above it is
  // a Python frame, and whether a Python frame is in its subtree (a native frame with none
  // above and some below is a start-up frame, folded in the mixed view).
  const SHOWN = D.keys.map((k) => k[4]);
  const pyAbove = new Uint8Array(P.length), pyBelow = new Uint8Array(P.length);
  for (let n = 0; n < P.length; n++) {
    pyAbove[n] = n > 0 && ((SHOWN[K[n]] === 0 && !D.keys[K[n]][3]) || (P[n] >= 0 && pyAbove[P[n]])) ? 1 : 0;
  }
  for (let n = P.length - 1; n >= 0; n--) {
    if (SHOWN[K[n]] === 0 && !D.keys[K[n]][3] && n > 0) pyBelow[n] = 1;
    if (pyBelow[n] && P[n] >= 0) pyBelow[P[n]] = 1;
  }
  let state = null;

  function seconds(ticks) { return ticks * D.tick_s; }
  function fmt(ticks) {
    const s = seconds(ticks);
    if (D.weights === "count") return Math.round(ticks / D.interval_ticks || 0).toLocaleString();
    if (s >= 100) return s.toFixed(1) + " s";
    if (s >= 1) return s.toFixed(3) + " s";
    if (s >= 1e-3) return (s * 1e3).toFixed(2) + " ms";
    return (s * 1e6).toFixed(0) + " µs";
  }
  // A sum of every picked thread's time: thread-seconds, not seconds of the recording.
  function threadSeconds(ticks) {
    if (D.weights === "count") return fmt(ticks) + " samples";
    const s = seconds(ticks);
    return (s >= 1 ? s.toFixed(3) : s.toPrecision(3)) + " thread-seconds";
  }
  function sliceTime(a) { return Math.max(0, D.origin_s + a * D.slice_s); }
  function timeSlice(t) { return Math.round((t - D.origin_s) / D.slice_s); }
  function clamp(x, lo, hi) { return Math.max(lo, Math.min(hi, x)); }

  // -- state in the fragment ---------------------------------------------------------------
  function readState() {
    const q = new URLSearchParams(location.hash.slice(1));
    const mode = D.modes.includes(q.get("mode")) && usable(q.get("mode")) ? q.get("mode") : D.mode;
    let a0 = 0, a1 = D.slices;
    if (q.has("from")) a0 = clamp(timeSlice(parseFloat(q.get("from"))) || 0, 0, D.slices - 1);
    if (q.has("to")) a1 = clamp(timeSlice(parseFloat(q.get("to"))) || D.slices, a0 + 1, D.slices);
    const known = new Set(D.threads.map((t) => t.ref));
    let threads = null;
    if (q.get("threads")) {
      threads = new Set(q.get("threads").split(",").map(Number).filter((r) => known.has(r)));
      if (!threads.size) threads = null;
    }
    // The flame graph sums cells of cell_factor slices: the window is widened to whole cells,
    // so that the brush, the words and the sums agree.
    const F = D.cell_factor, off = D.cell_offset;
    a0 = clamp(Math.floor((a0 + off) / F) * F - off, 0, D.slices - 1);
    a1 = clamp(Math.ceil((a1 + off) / F) * F - off, a0 + 1, D.slices);
    const zoom = q.get("zoom") ? q.get("zoom").split(".").map(Number) : [];
    const native = NATIVE_VIEWS.includes(q.get("native")) && D.native_view !== null
      ? q.get("native") : D.native_view;
    return { mode, a0, a1, threads, zoom, native, q: q.get("q") || "", sort: q.get("sort") || "own" };
  }
  // A mode the recording can answer (gil-wait needs a recording that knows GIL waits).
  function usable(mode) { return mode !== "gil-wait" || WAIT_KNOWN; }
  // replace: change the address without a new history entry (search as one types).
  function go(changes, replace) {
    const s = Object.assign({}, state, changes);
    const q = new URLSearchParams();
    if (s.mode !== D.mode) q.set("mode", s.mode);
    if (s.native !== D.native_view) q.set("native", s.native);
    if (s.a0 > 0) q.set("from", sliceTime(s.a0).toFixed(4));
    if (s.a1 < D.slices) q.set("to", sliceTime(s.a1).toFixed(4));
    if (s.threads) q.set("threads", [...s.threads].join(","));
    if (s.zoom.length) q.set("zoom", s.zoom.join("."));
    if (s.q) q.set("q", s.q);
    if (s.sort !== "own") q.set("sort", s.sort);
    const hash = "#" + q.toString();
    if (hash === location.hash || (hash === "#" && !location.hash)) render();
    else if (replace) { history.replaceState(null, "", hash === "#" ? location.pathname + location.search : hash); render(); }
    else location.hash = hash;
  }

  // -- the selection's stacks -----------------------------------------------------------------
  function aggregate() {
    const vals = C[state.mode], nodeVal = new Float64Array(P.length);
    const c0 = Math.floor((state.a0 + D.cell_offset) / D.cell_factor);
    const c1 = Math.floor((state.a1 - 1 + D.cell_offset) / D.cell_factor);
    const th = state.threads;
    for (let i = 0; i < N; i++) {
      const s = C.s[i];
      if (s < c0 || s > c1 || (th && !th.has(C.t[i]))) continue;
      nodeVal[C.n[i]] += vals[i];
    }
    return nodeVal;
  }
  // A trie node's key as the native view draws it: -1 where the view leaves it out (its time
  // goes to the frame above), the start-up key for a folded start-up frame.
  function viewKey(n) {
    const k = K[n], shown = SHOWN[k], view = state.native;
    if (view === null || shown === 0) return k;
    if (view === "python" || (view === "mixed" && shown === 2)) return -1;
    if (view === "mixed" && !pyAbove[n] && pyBelow[n]) return D.startup_key;
    return k;
  }
  // The stacks merged by report key: tree node 0 is the root (all stacks).
  function buildTree(nodeVal) {
    const need = new Uint8Array(P.length);
    for (let n = P.length - 1; n >= 0; n--) {
      if (nodeVal[n] > 0) need[n] = 1;
      if (need[n] && P[n] >= 0) need[P[n]] = 1;
    }
    const T = { key: [-1], parent: [-1], self: [0], total: [0], kids: [new Map()] };
    const tOf = new Int32Array(P.length).fill(-1);
    for (let n = 0; n < P.length; n++) {
      if (!need[n]) continue;
      const up = P[n] < 0 ? 0 : tOf[P[n]];
      const k = viewKey(n);
      // A frame the view leaves out, or a start-up frame under another: one with its parent.
      if (k < 0 || (k === D.startup_key && T.key[up] === k)) {
        tOf[n] = up;
        T.self[up] += nodeVal[n];
        continue;
      }
      let t = T.kids[up].get(k);
      if (t === undefined) {
        t = T.key.length;
        T.key.push(k); T.parent.push(up); T.self.push(0); T.total.push(0); T.kids.push(new Map());
        T.kids[up].set(k, t);
      }
      tOf[n] = t;
      T.self[t] += nodeVal[n];
    }
    for (let t = T.key.length - 1; t >= 0; t--) {
      T.total[t] += T.self[t];
      if (t > 0) T.total[T.parent[t]] += T.total[t];
    }
    return T;
  }
  // Own and total per key under tree node root (0: every stack; else the zoomed frame's
  // subtree); a key recursing is counted once per stack.
  function functionTotals(T, root) {
    const own = new Float64Array(D.keys.length), total = new Float64Array(D.keys.length);
    const onPath = new Int32Array(D.keys.length);
    const stack = [[root, false]];
    while (stack.length) {
      const [t, leaving] = stack.pop();
      const k = T.key[t];
      if (leaving) { if (k >= 0) onPath[k]--; continue; }
      if (k >= 0) {
        own[k] += T.self[t];
        if (!onPath[k]) total[k] += T.total[t];
        onPath[k]++;
      }
      stack.push([t, true]);
      for (const c of T.kids[t].values()) stack.push([c, false]);
    }
    return { own, total };
  }

  // -- drawing ------------------------------------------------------------------------------
  function hue(str) {
    let h = 0;
    for (let i = 0; i < str.length; i++) h = (h * 31 + str.charCodeAt(i)) >>> 0;
    return h % 360;
  }
  function keyText(k) {
    const [name, file, line] = D.keys[k];
    return file ? `${name} (${file}:${line})` : name;
  }

  function drawHeader() {
    $("#title").textContent = D.title;
    const secs = D.slices * D.slice_s;
    let threadTicks = 0;
    for (const per of Object.values(D.states)) for (const v of per[1]) threadTicks += v;
    const bits = [`${D.samples.toLocaleString()} samples`, `${secs.toFixed(2)} s long`,
                  `${D.thread_count.toLocaleString()} thread${D.thread_count === 1 ? "" : "s"}`,
                  `${seconds(threadTicks).toFixed(2)} thread-seconds (every thread's time added up)`];
    if (D.python) bits.unshift(`Python ${D.python}${D.free_threaded ? " (free-threaded)" : ""}`);
    if (D.pid) bits.unshift(`pid ${D.pid}: ${D.command}`);
    $("#meta").textContent = bits.join(" · ");
    const H = D.health, rate = [];
    if (H.requested_hz) rate.push(`${(+H.requested_hz).toLocaleString()} Hz asked`);
    if (H.achieved_hz !== null) rate.push(`${H.achieved_hz.toLocaleString(undefined, { maximumFractionDigits: 1 })} Hz achieved`);
    const health = [`rate: ${rate.join(", ") || "not recorded"}`,
                    `${H.missed_deadlines.toLocaleString()} missed deadline${H.missed_deadlines === 1 ? "" : "s"}`,
                    `${H.sample_errors.toLocaleString()} sample error${H.sample_errors === 1 ? "" : "s"}`];
    if (H.native_marked) health.push(H.native_marked);
    $("#health").textContent = health.join(" · ");
    $("#health").classList.toggle("warn", H.missed_deadlines > 0 || H.sample_errors > 0 ||
                                  !!H.native_marked);
    $("#health").title = "missed deadlines: sampling passes that started late; sample errors: " +
      "thread samples that could not be read (psrec info gives the same counts)";
    if (!WAIT_KNOWN) {
      $("#gil-wait-note").hidden = false;
      $("#gil-wait-note").textContent = `GIL waits are not shown: ${D.gil_wait_unknown}.`;
    }
    // Where the bounds on the page's size merged threads or slices, it says which.
    if (D.bounds.length) {
      $("#bounds-note").hidden = false;
      $("#bounds-note").textContent = `Merged to keep the page small: ${D.bounds.join("; ")}.`;
    }
    const modes = $("#modes");
    modes.innerHTML = "";
    for (const m of D.modes) {
      const b = document.createElement("button");
      b.type = "button";
      b.dataset.mode = m;
      b.textContent = m;
      b.title = D.mode_help[m];
      if (!usable(m)) { b.disabled = true; b.title = D.gil_wait_unknown; }
      modes.appendChild(b);
    }
    const views = $("#native-views");
    views.hidden = D.native_view === null;
    views.innerHTML = "";
    if (D.native_view !== null) {
      for (const v of NATIVE_VIEWS) {
        const b = document.createElement("button");
        b.type = "button";
        b.dataset.native = v;
        b.textContent = v === "python" ? "Python" : v;
        b.title = NATIVE_HELP[v];
        b.addEventListener("click", () => go({ native: v, zoom: [] }));
        views.appendChild(b);
      }
    }
    $("#legend").innerHTML = "";
    for (const [name, text] of STATES) {
      const span = document.createElement("span");
      span.innerHTML = `<i style="background: var(--${name})"></i>`;
      span.appendChild(document.createTextNode(text));
      $("#legend").appendChild(span);
    }
    if (D.free_threaded) {
      const b = document.querySelector('#modes [data-mode="gil"]');
      b.title = "no GIL on a free-threaded target: samples attached to the interpreter";
    }
  }

  function drawThreads() {
    const box = $("#threads");
    box.innerHTML = "";
    const css = getComputedStyle(document.documentElement);
    const colour = Object.fromEntries(["gil", "cpu", "wait", "idle"].map((n) => [n, css.getPropertyValue("--" + n).trim()]));
    const sliceTicks = D.slice_s / D.tick_s;
    for (const th of D.threads) {
      const row = document.createElement("div");
      row.className = "thread-row";
      row.dataset.ref = th.ref;
      const label = document.createElement("div");
      label.className = "thread-label";
      label.textContent = th.label;
      const [at, wall, gil, cpu, wait] = D.states[String(th.ref)] || [0, [], [], [], []];
      const sum = (xs) => xs.reduce((x, y) => x + y, 0);
      const all = sum(wall) || 1;
      const [g, c, w] = [sum(gil), sum(cpu), sum(wait)];
      label.title = `${th.label}: ${th.samples.toLocaleString()} samples; ` +
        shares(g, c, w, all).join(", ") + " (click to pick)";
      label.addEventListener("click", () => {
        let sel = state.threads ? new Set(state.threads) : new Set();
        if (sel.has(th.ref)) sel.delete(th.ref); else sel.add(th.ref);
        go({ threads: sel.size ? sel : null, zoom: [] });
      });
      const canvas = document.createElement("canvas");
      canvas.className = "strip";
      canvas.addEventListener("mousemove", (ev) => readout(ev, th, canvas));
      canvas.addEventListener("mouseleave", () => { $("#readout").hidden = true; });
      row.append(label, canvas);
      box.appendChild(row);
      requestAnimationFrame(() => {
        const w = canvas.clientWidth, h = canvas.clientHeight, r = window.devicePixelRatio || 1;
        canvas.width = Math.max(1, w * r); canvas.height = Math.max(1, h * r);
        const g = canvas.getContext("2d");
        g.scale(r, r);
        const dx = w / D.slices;
        for (let i = 0; i < wall.length; i++) {
          if (!wall[i]) continue;
          const a = at + i;
          const w = WAIT_KNOWN ? wait[i] : 0;
          const parts = [["gil", gil[i]], ["cpu", cpu[i]], ["wait", w],
                         ["idle", Math.max(0, wall[i] - gil[i] - cpu[i] - w)]];
          // whole pixels, so that neighbouring slices leave no seams between them
          const x0 = Math.floor(a * dx), x1 = Math.max(x0 + 1, Math.floor((a + 1) * dx));
          let y = h;
          for (const [name, v] of parts) {
            // a row for many threads (the last, where the page merged some) is full where
            // every one of them is
            const ph = Math.min(y, (v / (sliceTicks * (th.threads || 1))) * h);
            if (ph <= 0) continue;
            g.fillStyle = colour[name];
            g.fillRect(x0, y - ph, x1 - x0, ph);
            y -= ph;
          }
        }
      });
    }
    const brush = document.createElement("div");
    brush.id = "brush";
    box.appendChild(brush);
    let start = null;
    const sliceAt = (ev) => {
      const strip = box.querySelector(".strip").getBoundingClientRect();
      return clamp(Math.floor(((ev.clientX - strip.left) / strip.width) * D.slices), 0, D.slices);
    };
    box.addEventListener("mousedown", (ev) => {
      if (ev.target.classList.contains("strip")) { start = sliceAt(ev); ev.preventDefault(); }
    });
    window.addEventListener("mousemove", (ev) => {
      if (start === null) return;
      const b = sliceAt(ev);
      placeBrush(Math.min(start, b), Math.max(start, b) + 1);
    });
    window.addEventListener("mouseup", (ev) => {
      if (start === null) return;
      const b = sliceAt(ev), lo = Math.min(start, b), hi = Math.max(start, b) + 1;
      start = null;
      if (hi - lo <= 1) go({ a0: 0, a1: D.slices, zoom: [] });
      else go({ a0: lo, a1: Math.min(hi, D.slices), zoom: [] });
    });
  }

  // "25.0% running, holding the GIL, ...": a thread's (or a cell's) time by state.
  function shares(g, c, w, all) {
    const pct = (v) => (100 * v / (all || 1)).toFixed(1) + "%";
    const out = [`${pct(g)} ${LABEL.gil}`, `${pct(c)} ${LABEL.cpu}`];
    if (WAIT_KNOWN) out.push(`${pct(w)} ${LABEL.wait}`);
    out.push(`${pct(Math.max(0, all - g - c - w))} ${LABEL.idle}`);
    return out;
  }
  // The hover readout of a strip: the thread, the slice's time and its states' shares.
  function readout(ev, th, canvas) {
    const box = canvas.getBoundingClientRect();
    const a = clamp(Math.floor(((ev.clientX - box.left) / box.width) * D.slices), 0, D.slices - 1);
    const [at, wall, gil, cpu, wait] = D.states[String(th.ref)] || [0, [], [], [], []];
    const i = a - at, el = $("#readout");
    const when = `${sliceTime(a).toFixed(3)}–${sliceTime(a + 1).toFixed(3)} s`;
    el.textContent = "";
    const head = document.createElement("b");
    head.textContent = th.label;
    el.append(head, ` · ${when}`);
    const body = document.createElement("div");
    body.textContent = i >= 0 && i < wall.length && wall[i]
      ? shares(gil[i], cpu[i], WAIT_KNOWN ? wait[i] : 0, wall[i]).join(" · ")
      : "no samples of this thread here";
    el.appendChild(body);
    el.dataset.slice = String(a);
    el.hidden = false;
    const x = Math.min(ev.clientX + 14, window.innerWidth - el.offsetWidth - 8);
    el.style.left = Math.max(0, x) + "px";
    el.style.top = ev.clientY + 16 + "px";
  }

  function placeBrush(a0, a1) {
    const brush = $("#brush"), strip = document.querySelector(".strip");
    if (!strip) return;
    const full = a0 <= 0 && a1 >= D.slices;
    brush.style.display = full ? "none" : "block";
    const left = strip.offsetLeft, w = strip.clientWidth;
    brush.style.left = left + (a0 / D.slices) * w + "px";
    brush.style.width = ((a1 - a0) / D.slices) * w + "px";
  }

  function drawAxis() {
    const axis = $("#axis");
    axis.innerHTML = "";
    const secs = D.slices * D.slice_s;
    const step = niceStep(secs / 8);
    const w = axis.clientWidth;
    for (let t = Math.ceil(D.origin_s / step) * step; t <= D.origin_s + secs; t += step) {
      const span = document.createElement("span");
      span.style.left = ((t - D.origin_s) / secs) * w + "px";
      span.textContent = `${+t.toFixed(6)} s`;
      axis.appendChild(span);
    }
  }
  function niceStep(x) {
    const p = Math.pow(10, Math.floor(Math.log10(x || 1)));
    for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
    return 10 * p;
  }

  function drawFlame(T, re) {
    const box = $("#icicle");
    box.innerHTML = "";
    // The zoomed frame: the path of keys from the root, where the selection still has it.
    let root = 0;
    for (const k of state.zoom) {
      const t = T.kids[root].get(k);
      if (t === undefined) break;
      root = t;
    }
    const path = [];
    for (let t = root; t > 0; t = T.parent[t]) path.unshift(t);
    psrecPage.crumbs($("#crumbs"), path.map((t) => D.keys[T.key[t]][0]),
                     (i) => go({ zoom: path.slice(0, i).map((x) => T.key[x]) }));
    const width = box.clientWidth || 800, rowH = 18, rootTotal = T.total[root];
    if (!(rootTotal > 0)) {
      box.style.height = "40px";
      box.textContent = state.mode === "gil-wait" && !WAIT_KNOWN
        ? `nothing to show: ${D.gil_wait_unknown}` : "nothing in this selection";
      return { root, matched: 0 };
    }
    let drawn = 0, depthMax = 0, matched = 0;
    const todo = [[root, 0, 0]];
    const frag = document.createDocumentFragment();
    while (todo.length && drawn < 6000) {
      const [t, x, depth] = todo.pop();
      const w = (T.total[t] / rootTotal) * width;
      if (t !== root || root !== 0) {
        const k = T.key[t];
        const div = document.createElement("div");
        div.className = "frame";
        div.style.left = x + "px";
        div.style.top = depth * rowH + "px";
        div.style.width = w + "px";
        const [name, file, , native] = D.keys[k];
        // Python frames in warm colours by file and function, native ones in blues.
        div.style.background = native
          ? `hsl(${200 + (hue(name) % 40)}, 55%, ${76 - (hue(file) % 12)}%)`
          : `hsl(${(hue(file) + (hue(name) % 50)) % 360}, 60%, ${74 - (hue(name) % 14)}%)`;
        div.dataset.name = name;
        const share = (100 * T.total[t]) / (T.total[0] || 1);
        div.title = `${keyText(k)}\ntotal ${fmt(T.total[t])} (${share.toFixed(1)}%), own ${fmt(T.self[t])}`;
        if (w > 28) div.textContent = name;
        if (re && re.test(keyText(k))) div.classList.add("match");
        const zoomTo = [];
        for (let u = t; u > 0; u = T.parent[u]) zoomTo.unshift(T.key[u]);
        div.addEventListener("click", () => go({ zoom: zoomTo }));
        frag.appendChild(div);
        drawn++;
        depthMax = Math.max(depthMax, depth);
      }
      const next = t === root && root === 0 ? depth : depth + 1;
      let cx = x;
      const kids = [...T.kids[t].values()].sort((a, b) => T.total[b] - T.total[a]);
      const queued = [];
      for (const c of kids) {
        const cw = (T.total[c] / rootTotal) * width;
        if (cw >= 0.5) queued.push([c, cx, next]);
        cx += cw;
      }
      for (let i = queued.length - 1; i >= 0; i--) todo.push(queued[i]);
    }
    box.appendChild(frag);
    box.style.height = (depthMax + 1) * rowH + 2 + "px";
    if (re) {
      // The time in matching frames, each stack counted once (its outermost match).
      const stack = [[root, false]];
      while (stack.length) {
        const [t] = stack.pop();
        if (t > 0 && re.test(keyText(T.key[t]))) { matched += T.total[t]; continue; }
        for (const c of T.kids[t].values()) stack.push([c, false]);
      }
    }
    return { root, matched };
  }

  // The functions of the selection, or of the zoomed frame's subtree (root), that the
  // search matches: every one is searched, the first 300 in the order picked are shown.
  function drawTable(T, re, root) {
    const { own, total } = functionTotals(T, root);
    const all = T.total[root] || 1;
    const rows = [];
    for (let k = 0; k < D.keys.length; k++) {
      if (total[k] > 0 && (!re || re.test(keyText(k)))) rows.push(k);
    }
    const by = state.sort;
    rows.sort((a, b) => by === "name" ? D.keys[a][0].localeCompare(D.keys[b][0])
      : by === "total" ? total[b] - total[a] : own[b] - own[a] || total[b] - total[a]);
    const body = document.querySelector("#functions tbody");
    body.innerHTML = "";
    for (const k of rows.slice(0, 300)) {
      const [name, file, line] = D.keys[k];
      const tr = psrecPage.functionRow([fmt(own[k]), (100 * own[k] / all).toFixed(1) + "%",
                                        fmt(total[k]), (100 * total[k] / all).toFixed(1) + "%"],
                                       name, file, line);
      tr.addEventListener("click", () => go({ q: "^" + name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "( \\(|$)" }));
      body.appendChild(tr);
    }
    const where = root ? `under ${D.keys[T.key[root]][0]} (the zoomed frame; shares of its ${threadSeconds(T.total[root])})`
      : "in the selection";
    const count = `${rows.length.toLocaleString()} function${rows.length === 1 ? "" : "s"}` +
      (re ? " matching the search" : "");
    $("#table-caption").textContent = `${count} ${where}` +
      (rows.length > 300 ? `; the first 300 shown` : "");
  }

  // -- asyncio tasks ---------------------------------------------------------------------------
  // Each task's time in the window and threads picked (the task cells carry wall and CPU
  // ticks whatever the mode, and the wall ticks the task waited, suspended or ready, on the
  // row of the thread that ran it), then the tasks grouped by their coroutine.
  function drawTasks() {
    const TK = D.tasks;
    if (!TK) return;
    $("#tasks").hidden = false;
    const c0 = Math.floor((state.a0 + D.cell_offset) / D.cell_factor);
    const c1 = Math.floor((state.a1 - 1 + D.cell_offset) / D.cell_factor);
    const th = state.threads, X = TK.cells;
    const wall = new Float64Array(TK.rows.length), cpu = new Float64Array(TK.rows.length);
    const n = new Float64Array(TK.rows.length), waited = new Float64Array(TK.rows.length);
    for (let i = 0; i < X.s.length; i++) {
      if (X.s[i] < c0 || X.s[i] > c1 || (th && !th.has(X.t[i]))) continue;
      wall[X.k[i]] += X.wall[i];
      cpu[X.k[i]] += X.cpu[i];
      n[X.k[i]] += X.n[i];
      waited[X.k[i]] += X.wait[i];
    }
    const all = wall.reduce((a, b) => a + b, 0) || 1;
    // CPU time in seconds even where the page counts samples.
    const cpuText = (t) => D.weights === "count" ? (seconds(t) * 1e3).toFixed(2) + " ms" : fmt(t);
    // (The row of the tasks that ran least, past the page's bound, comes last.)
    const last = (k) => TK.rows[k][2] < 0 ? 1 : 0;
    const waitText = (t) => t > 0 ? cpuText(t) : "-";
    const shown = [...TK.rows.keys()].filter((k) => n[k] > 0 || waited[k] > 0)
      .sort((a, b) => last(a) - last(b) || wall[b] - wall[a]);
    const body = $("#task-table tbody");
    body.innerHTML = "";
    for (const k of shown.slice(0, 300)) {
      const [label, c] = TK.rows[k];
      body.appendChild(psrecPage.row([fmt(wall[k]), (100 * wall[k] / all).toFixed(1) + "%",
                                      cpuText(cpu[k]), waitText(waited[k]),
                                      n[k].toLocaleString()],
                                     label, TK.coroutines[c]));
    }
    const tasks = shown.filter((k) => TK.rows[k][2] > 0 && n[k] > 0).length;
    $("#tasks-caption").textContent = `${tasks.toLocaleString()} task${tasks === 1 ? "" : "s"} ` +
      `ran in the selection; running time is the event loops' threads' time, ${threadSeconds(all)} ` +
      "in all; <no task> is the loops' own (polling, callbacks); waited is the wall time a task " +
      "spent suspended at an await or ready for its loop (psrec report --tasks says where)" +
      (shown.length > 300 ? "; the first 300 tasks shown" : "");
    const groups = new Map();
    for (const k of shown) {
      const [, c, id] = TK.rows[k], coroutine = TK.coroutines[c];
      if (id <= 0) continue;
      const g = groups.get(coroutine) || { wall: 0, cpu: 0, waited: 0, tasks: 0 };
      g.wall += wall[k]; g.cpu += cpu[k]; g.waited += waited[k]; g.tasks += 1;
      groups.set(coroutine, g);
    }
    // Where the tasks waited: each await's waiting time in the selection.
    const W = TK.site_cells, atSite = new Float64Array(TK.sites.length);
    for (let i = 0; i < W.s.length; i++) {
      if (W.s[i] < c0 || W.s[i] > c1 || (th && !th.has(W.t[i]))) continue;
      atSite[W.k[i]] += W.wait[i];
    }
    const allWaits = atSite.reduce((a, b) => a + b, 0) || 1;
    const abody = $("#await-table tbody");
    abody.innerHTML = "";
    const awaits = [...TK.sites.keys()].filter((k) => atSite[k] > 0)
      .sort((a, b) => atSite[b] - atSite[a]);
    for (const k of awaits.slice(0, 300)) {
      abody.appendChild(psrecPage.row([waitText(atSite[k]),
                                       (100 * atSite[k] / allWaits).toFixed(1) + "%"],
                                      TK.sites[k], ""));
    }
    $("#await-table").hidden = awaits.length === 0;
    const gbody = $("#coroutine-table tbody");
    gbody.innerHTML = "";
    for (const [coroutine, g] of [...groups].sort((a, b) => b[1].wall - a[1].wall).slice(0, 300)) {
      gbody.appendChild(psrecPage.row([fmt(g.wall), (100 * g.wall / all).toFixed(1) + "%",
                                       cpuText(g.cpu), waitText(g.waited),
                                       g.tasks.toLocaleString()],
                                      coroutine || "<coroutine not known>", ""));
    }
  }

  // The search box's pattern: a regular expression, or, where it is not one, its plain text
  // (and the page says so).
  function pattern(text) {
    const err = $("#search-error");
    err.textContent = "";
    $("#search").classList.remove("bad");
    if (!text) return null;
    try { return new RegExp(text, "i"); } catch (e) {
      err.textContent = `not a regular expression (${e.message.replace(/^Invalid regular expression: /, "")}): searched as plain text`;
      $("#search").classList.add("bad");
      return new RegExp(text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "i");
    }
  }

  function render() {
    const t0 = performance.now();
    state = readState();
    for (const b of document.querySelectorAll("#modes button")) {
      b.classList.toggle("on", b.dataset.mode === state.mode);
    }
    for (const b of document.querySelectorAll("#native-views button")) {
      b.classList.toggle("on", b.dataset.native === state.native);
    }
    for (const row of document.querySelectorAll(".thread-row")) {
      row.classList.toggle("off", !!state.threads && !state.threads.has(Number(row.dataset.ref)));
    }
    if ($("#search").value !== state.q) $("#search").value = state.q;
    const re = pattern(state.q);
    placeBrush(state.a0, state.a1);
    const T = buildTree(aggregate());
    const { root, matched } = drawFlame(T, re);
    drawTable(T, re, root);
    drawTasks();
    // A row can stand for many threads (those the page merged into its last row).
    const nThreads = state.threads
      ? D.threads.reduce((n, t) => n + (state.threads.has(t.ref) ? t.threads || 1 : 0), 0)
      : D.thread_count;
    $("#selection").textContent = `${state.mode} · ${sliceTime(state.a0).toFixed(3)}–` +
      `${sliceTime(state.a1).toFixed(3)} s · ${nThreads} of ${D.thread_count} threads · ` +
      threadSeconds(T.total[0]);
    $("#matched").textContent = re ? `matched: ${fmt(matched)} (${(100 * matched / (T.total[root] || 1)).toFixed(1)}% of ` +
      `${root ? "the zoomed frame" : "the selection"})` : "";
    const status = $("#status");
    status.dataset.ready = "1";
    status.dataset.mode = state.mode;
    status.dataset.native = state.native || "";
    status.textContent = `psrec ${D.psrec} · drawn in ${(performance.now() - t0).toFixed(0)} ms`;
  }

  drawHeader();
  state = readState();
  drawThreads();
  drawAxis();
  for (const b of document.querySelectorAll("#modes button")) {
    b.addEventListener("click", () => go({ mode: b.dataset.mode, zoom: state.zoom }));
  }
  for (const th of document.querySelectorAll("#functions th")) {
    th.addEventListener("click", () => go({ sort: th.dataset.sort }));
  }
  // Search as one types: the address follows without a history entry per key.
  let typing = 0;
  $("#search").addEventListener("input", (ev) => {
    clearTimeout(typing);
    typing = setTimeout(() => go({ q: ev.target.value }, true), 120);
  });
  $("#search").addEventListener("change", (ev) => { clearTimeout(typing); go({ q: ev.target.value }); });
  $("#reset").addEventListener("click", () => go({ mode: D.mode, native: D.native_view, a0: 0, a1: D.slices, threads: null, zoom: [], q: "" }));
  window.addEventListener("hashchange", render);
  window.addEventListener("resize", () => { drawAxis(); render(); });
  render();
})();
