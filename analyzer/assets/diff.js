// psrec's differential flame graph: draws psrec.analyzer.diff's merged tree of two recordings.
// A frame is as wide as its share of one recording (new by default) and coloured by how its
// share changed: red grew, blue shrank. Size, zoom and search live in the #fragment.
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
  let maxDelta = 1e-9;
  for (let i = 0; i < n; i++) maxDelta = Math.max(maxDelta, Math.abs(share("new", i) - share("base", i)));
  const pct = (x) => (100 * x).toFixed(1) + "%";
  const pp = (x) => (x >= 0 ? "+" : "") + (100 * x).toFixed(2);

  function readState() {
    const q = new URLSearchParams(location.hash.slice(1));
    return { size: q.get("size") === "base" ? "base" : "new",
             zoom: q.get("zoom") ? q.get("zoom").split(".").map(Number) : [], q: q.get("q") || "" };
  }
  function go(changes) {
    const s = Object.assign(readState(), changes), q = new URLSearchParams();
    if (s.size !== "new") q.set("size", s.size);
    if (s.zoom.length) q.set("zoom", s.zoom.join("."));
    if (s.q) q.set("q", s.q);
    location.hash = "#" + q.toString();
  }

  function render() {
    const s = readState();
    for (const b of document.querySelectorAll("#modes button")) b.classList.toggle("on", b.dataset.size === s.size);
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
      const delta = share("new", i) - share("base", i);
      const div = document.createElement("div");
      div.className = "frame " + (delta > 0 ? "grew" : delta < 0 ? "shrank" : "same");
      const a = Math.min(1, Math.abs(delta) / maxDelta);
      div.style.background = delta > 0 ? `rgba(214, 51, 108, ${0.15 + 0.85 * a})`
        : delta < 0 ? `rgba(28, 126, 214, ${0.15 + 0.85 * a})` : "#e9ecef";
      if (a < 0.45) div.style.color = "#1b1b1b";
      div.style.left = x + "px";
      div.style.top = depth * rowH + "px";
      div.style.width = w + "px";
      div.dataset.name = name;
      div.dataset.delta = pp(delta);
      div.title = `${name} (${file}:${line})\nbase ${pct(share("base", i))} → new ${pct(share("new", i))} (${pp(delta)} points)`;
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
    for (const [name, file, line, bOwn, nOwn, bTot, nTot, z] of D.rows) {
      if (re && !re.test(`${name} (${file}:${line})`)) continue;
      body.appendChild(psrecPage.functionRow(
        [pct(bOwn), pct(nOwn), pp(nOwn - bOwn), pp(nTot - bTot), z.toFixed(1)], name, file, line));
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
  $("#search").addEventListener("change", (ev) => go({ q: ev.target.value }));
  window.addEventListener("hashchange", render);
  window.addEventListener("resize", render);
  render();
})();
