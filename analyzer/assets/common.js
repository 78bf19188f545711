// What psrec's pages share (inlined before each page's own script): the breadcrumbs of a
// zoomed flame graph and a row of a function table.
"use strict";
const psrecPage = {
  // "all › a › b": labels of the zoomed path; pick(i) zooms to its first i frames (0: all).
  crumbs(box, labels, pick) {
    box.innerHTML = "";
    ["all", ...labels].forEach((label, i) => {
      if (i) box.appendChild(document.createTextNode(" › "));
      const a = document.createElement("a");
      a.textContent = label;
      a.addEventListener("click", () => pick(i));
      box.appendChild(a);
    });
  },
  // A table row: the numbers, then the function's name and, small, its file and line.
  functionRow(texts, name, file, line) {
    // (a frame of psrec's own, such as the folded start-up frames, has no file)
    const tr = psrecPage.row(texts, name, file ? `${file}:${line}` : "");
    tr.dataset.name = name;
    return tr;
  },
  // A table row: the numbers, then a name and, small, a note about it (none if empty).
  row(texts, name, note) {
    const tr = document.createElement("tr");
    for (const text of texts) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.appendChild(td);
    }
    const td = document.createElement("td");
    td.appendChild(document.createTextNode(note ? name + " " : name));
    if (note) {
      const small = document.createElement("small");
      small.textContent = note;
      td.appendChild(small);
    }
    tr.appendChild(td);
    return tr;
  },
};
