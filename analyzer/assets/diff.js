// psrec's differential flame graph: draws psrec.analyzer.diff's merged tree of two recordings.
// A frame is as wide as its share of one recording (new by default) and coloured by how its
// share changed, or compared in seconds (#compare=seconds) how its time changed: red grew,
// blue shrank. Size, measure, zoom and search live in the #fragment.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("psrec-data").textContent);
  const $ = (sel) => document.querySelector(sel);
  const P = D.parent, K = D.key, n = P.length;
  // Totals per node (children come after their parents) and per recording.
  const tot = { base: new Float64Array(n), new: new Float64Array(n) };
  const kids = Array.from({ length: n }, () => []);
  const roots = [];
  for (let i = n - 1; i >= 0; i--) {
    for (const side of ["base", "new"]) {
      tot[side][i] += D["own_" + side][i];
      if (P[i] >= 0) tot[side][P[i]] += tot[side][i];
    }
  }
  for (let i = 0; i < n; i++) (P[i] >= 0 ? kids[P[i]] : roots).push(i);
  const all = { base: 0, new: 0 };
  for (const r of roots) { all.base += tot.base[r]; all.new += tot.new[r]; }
  const share = (side, i) => (all[side] ? tot[side][i] / all[side] : 0);
  const secs = (side, i) => tot[side][i] * D.tick_s;
  // The measure compared: share of each recording's total, or seconds.
  const measure = (absolute) => (absolute ? secs : share);
  const maxDelta = {};
  for (const absolute of [false, true]) {
    const m = measure(absolute);
    let most = 1e-12;
    for (let i = 0; i < n; i++) most = Math.max(most, Math.abs(m("new", i) - m("base", i)));
    maxDelta[absolute] = most;
  }
  const pct = (x) => (100 * x).toFixed(1) + "%";
  const pp = (x) => (x >= 0 ? "+" : "") + (100 * x).toFixed(2);
  const sec = (x) => x.toFixed(3) + " s";
  const ds = (x) => (x >= 0 ? "+" : "") + x.toFixed(3);

  function readState() {
    const q = new URLSearchParams(location.hash.slice(1));
    const compare = q.get("compare");
    return { size: q.get("size") === "base" ? "base" : "new",
             absolute: compare ? compare === "seconds" : D.absolute,
             zoom: q.get("zoom") ? q.get("zoom").split(".").map(Number) : [], q: q.get("q") || "" };
  }
  function go(changes) {
    const s = Object.assign(readState(), changes), q = new URLSearchParams();
    if (s.size !== "new") q.set("size", s.size);
    if (s.absolute !== D.absolute) q.set("compare", s.absolute ? "seconds" : "shares");
    if (s.zoom.length) q.set("zoom", s.zoom.join("."));
    if (s.q) q.set("q", s.q);
    location.hash = "#" + q.toString();
  }

  function render() {
    const s = readState();
    for (const b of document.querySelectorAll("#modes button")) b.classList.toggle("on", b.dataset.size === s.size);
    for (const b of document.querySelectorAll("#compare button")) b.classList.toggle("on", (b.dataset.compare === "seconds") === s.absolute);
    const m = measure(s.absolute), most = maxDelta[s.absolute], fmtDelta = s.absolute ? ds : pp;
    $("#legend-unit").textContent = s.absolute ? "(seconds of each recording, new minus base)"
      : "(share of each recording's own total, in percentage points)";
    let re = null;
    if (s.q) { try { re = new RegExp(s.q, "i"); } catch (e) { re = null; } }
    if ($("#search").value !== s.q) $("#search").value = s.q;
    // The zoomed frame, by the path of keys from a root.
    let level = roots, node = -1;
    const path = [];
    for (const k of s.zoom) {
      const next = level.find((i) => K[i] === k);
      if (next === undefined) break;
      node = next; path.push(next); level = kids[next];
    }
    psrecPage.crumbs($("#crumbs"), path.map((i) => D.keys[K[i]][0]),
                     (j) => go({ zoom: path.slice(0, j).map((x) => K[x]) }));
    const box = $("#icicle");
    box.innerHTML = "";
    const width = box.clientWidth || 900, rowH = 18;
    const side = s.size, rootTotal = node >= 0 ? tot[side][node] : all[side];
    const frag = document.createDocumentFragment();
    let depthMax = 0, drawn = 0;
    const todo = [];
    const start = node >= 0 ? [node] : roots;
    let x0 = 0;
    for (const r of [...start].sort((a, b) => tot[side][b] - tot[side][a])) {
      const w = rootTotal ? (tot[side][r] / rootTotal) * width : 0;
      if (w >= 0.5) todo.push([r, x0, 0]);
      x0 += w;
    }
    todo.reverse();
    while (todo.length && drawn < 6000) {
      const [i, x, depth] = todo.pop();
      const w = (tot[side][i] / rootTotal) * width;
      const [name, file, line] = D.keys[K[i]];
      const delta = m("new", i) - m("base", i);
      const div = document.createElement("div");
      div.className = "frame " + (delta > 0 ? "grew" : delta < 0 ? "shrank" : "same");
      const a = Math.min(1, Math.abs(delta) / most);
      div.style.background = delta > 0 ? `rgba(214, 51, 108, ${0.15 + 0.85 * a})`
        : delta < 0 ? `rgba(28, 126, 214, ${0.15 + 0.85 * a})` : "#e9ecef";
      if (a < 0.45) div.style.color = "#1b1b1b";
      div.style.left = x + "px";
      div.style.top = depth * rowH + "px";
      div.style.width = w + "px";
      div.dataset.name = name;
      div.dataset.delta = fmtDelta(delta);
      div.title = s.absolute
        ? `${name} (${file}:${line})\nbase ${sec(secs("base", i))} → new ${sec(secs("new", i))} (${ds(delta)} s)`
        : `${name} (${file}:${line})\nbase ${pct(share("base", i))} → new ${pct(share("new", i))} (${pp(delta)} points)`;
      if (w > 28) div.textContent = name;
      if (re && re.test(`${name} (${file}:${line})`)) div.classList.add("match");
      const zoomTo = [];
      for (let u = i; u >= 0; u = P[u]) zoomTo.unshift(K[u]);
      div.addEventListener("click", () => go({ zoom: zoomTo }));
      frag.appendChild(div);
      drawn++;
      depthMax = Math.max(depthMax, depth);
      let cx = x;
      const queued = [];
      for (const c of [...kids[i]].sort((a, b) => tot[side][b] - tot[side][a])) {
        const cw = (tot[side][c] / rootTotal) * width;
        if (cw >= 0.5) queued.push([c, cx, depth + 1]);
        cx += cw;
      }
      for (let j = queued.length - 1; j >= 0; j--) todo.push(queued[j]);
    }
    box.appendChild(frag);
    box.style.height = (depthMax + 1) * rowH + 2 + "px";

    const body = $("#functions tbody");
    body.innerHTML = "";
    // Each row has both measures (shares from index 3, seconds from 8): ordered and cut as
    // psrec diff orders them, by the measure shown.
    const at = s.absolute ? 8 : 3;
    const change = (r) => D.sort === "total" ? r[at + 3] - r[at + 2] : r[at + 1] - r[at];
    const other = (r) => D.sort === "total" ? r[at + 1] - r[at] : r[at + 3] - r[at + 2];
    const rows = [...D.rows].sort((x, y) => D.sort === "z" ? Math.abs(y[at + 4]) - Math.abs(x[at + 4])
      : Math.abs(change(y)) - Math.abs(change(x)) || Math.abs(other(y)) - Math.abs(other(x)));
    const own = s.absolute ? sec : pct;
    let shown = 0;
    for (const r of rows) {
      const [name, file, line] = r, [bOwn, nOwn, bTot, nTot, z] = r.slice(at, at + 5);
      if (shown >= D.limit) break;
      if (re && !re.test(`${name} (${file}:${line})`)) continue;
      body.appendChild(psrecPage.functionRow(
        [own(bOwn), own(nOwn), fmtDelta(nOwn - bOwn), fmtDelta(nTot - bTot), z.toFixed(1)], name, file, line));
      shown++;
    }
    const status = $("#status");
    status.dataset.ready = "1";
    status.dataset.size = side;
    status.textContent = `psrec ${D.psrec}`;
  }

  $("#title").textContent = D.title;
  $("#meta").innerHTML = "";
  for (const [label, text] of [["base", D.base], ["new", D.new]]) {
    const div = document.createElement("div");
    div.textContent = `${label}: ${text}`;
    $("#meta").appendChild(div);
  }
  for (const b of document.querySelectorAll("#modes button")) b.addEventListener("click", () => go({ size: b.dataset.size }));
  for (const b of document.querySelectorAll("#compare button")) b.addEventListener("click", () => go({ absolute: b.dataset.compare === "seconds" }));
  $("#search").addEventListener("change", (ev) => go({ q: ev.target.value }));
  window.addEventListener("hashchange", render);
  window.addEventListener("resize", render);
  render();
})();
