// The rlx graph viewer: draws the JSON in #rlx-data as SVG. No external resources.
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const data = JSON.parse(document.getElementById("rlx-data").textContent);
  const svg = document.getElementById("graph");
  const byId = new Map(data.nodes.map((n) => [n.id, n]));
  const collapsed = new Set(data.collapsed ? data.blocks : []);
  let view = { x: 0, y: 0, w: 1000, h: 800 };
  let selected = null;

  function el(tag, attrs, parent) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function bbox(members) {
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const n of members) {
      x0 = Math.min(x0, n.x - n.w / 2); x1 = Math.max(x1, n.x + n.w / 2);
      y0 = Math.min(y0, n.y); y1 = Math.max(y1, n.y + n.h);
    }
    return { x0, y0, x1, y1 };
  }

  // what is drawn for a node: itself, or its collapsed block
  function unitOf(n) { return n.block && collapsed.has(n.block) ? "b:" + n.block : "n:" + n.id; }

  function render() {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const frames = el("g", {}, svg), edgesG = el("g", {}, svg), nodesG = el("g", {}, svg);
    const units = new Map();
    const members = new Map();
    for (const n of data.nodes) {
      if (n.block) { if (!members.has(n.block)) members.set(n.block, []); members.get(n.block).push(n); }
    }
    for (const [name, ms] of members) {
      const b = bbox(ms);
      if (collapsed.has(name)) {
        const w = Math.max(120, name.length * 7 + 40), cx = (b.x0 + b.x1) / 2;
        units.set("b:" + name, { x: cx, y: b.y0, w: w, h: 40, label: name + " (" + ms.length + " ops)", block: name });
      } else {
        el("rect", { class: "block-frame", x: b.x0 - 10, y: b.y0 - 22, width: b.x1 - b.x0 + 20, height: b.y1 - b.y0 + 32, rx: 8 }, frames);
        const t = el("text", { class: "block-title", x: b.x0 - 4, y: b.y0 - 8 }, frames);
        t.textContent = "▾ " + name;
        t.addEventListener("click", (ev) => { ev.stopPropagation(); collapsed.add(name); render(); });
      }
    }
    for (const n of data.nodes) if (unitOf(n)[0] === "n") units.set("n:" + n.id, { x: n.x, y: n.y, w: n.w, h: n.h, label: n.label, node: n });
    const seen = new Set();
    for (const [src, dst, label] of data.edges) {
      const a = unitOf(byId.get(src)), b = unitOf(byId.get(dst));
      if (a === b || seen.has(a + ">" + b)) continue;
      seen.add(a + ">" + b);
      const u = units.get(a), v = units.get(b);
      const y0 = u.y + u.h, y1 = v.y, my = (y0 + y1) / 2;
      const p = el("path", { class: "edge", d: `M${u.x},${y0} C${u.x},${my} ${v.x},${my} ${v.x},${y1}` }, edgesG);
      el("title", {}, p).textContent = `%${src} → %${dst}: ${label}`;
    }
    for (const [key, u] of units) {
      const n = u.node;
      const cls = "node" + (n ? (n.kind === "input" ? " leaf" : "") + (n.output ? " out" : "") : " block") +
        (n && selected === n.id ? " sel" : "");
      const g = el("g", { class: cls, "data-key": key, transform: `translate(${u.x - u.w / 2},${u.y})` }, nodesG);
      el("rect", { width: u.w, height: u.h, fill: n ? data.colors[n.kind] || "#fff" : data.colors.block }, g);
      const lines = u.label.split("\n");
      lines.forEach((line, i) => {
        const t = el("text", { x: u.w / 2, y: (u.h - 13 * lines.length) / 2 + 11 + 13 * i, "text-anchor": "middle" }, g);
        t.textContent = line;
      });
      el("title", {}, g).textContent = n ? n.details.map((r) => r[0] + ": " + r[1]).join("\n") : u.label + " — click to expand";
      g.addEventListener("click", (ev) => {
        ev.stopPropagation();
        if (!n) { collapsed.delete(u.block); render(); return; }
        select(n.id);
      });
    }
    applySearch();
    document.body.setAttribute("data-rendered", String(units.size));
  }

  function select(id) {
    selected = id;
    const n = byId.get(id);
    const rows = n.details.map((r) => `<tr><td>${esc(r[0])}</td><td>${esc(r[1])}</td></tr>`).join("");
    document.getElementById("details").innerHTML = `<table>${rows}</table>`;
    for (const g of svg.querySelectorAll(".node")) g.classList.toggle("sel", g.getAttribute("data-key") === "n:" + id);
    for (const r of document.querySelectorAll(".buf")) r.classList.toggle("sel", r.getAttribute("data-node") === String(id));
  }

  function esc(s) { return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]); }

  // ------------------------------------------------------------------ search
  let hits = [], hitIndex = -1;
  function applySearch() {
    const q = document.getElementById("search").value.trim().toLowerCase();
    hits = q ? data.nodes.filter((n) => n.search.includes(q)) : [];
    const keys = new Set(hits.map((n) => unitOf(n)));
    for (const g of svg.querySelectorAll(".node")) g.classList.toggle("hit", keys.has(g.getAttribute("data-key")));
    document.getElementById("hits").textContent = q ? `${hits.length} match${hits.length === 1 ? "" : "es"}` : "";
  }
  document.getElementById("search").addEventListener("input", () => { hitIndex = -1; applySearch(); });
  document.getElementById("search").addEventListener("keydown", (ev) => {
    if (ev.key !== "Enter" || !hits.length) return;
    hitIndex = (hitIndex + 1) % hits.length;
    const n = hits[hitIndex];
    if (n.block && collapsed.has(n.block)) { collapsed.delete(n.block); render(); }
    center(n.x, n.y + n.h / 2);
    select(n.id);
  });

  // ------------------------------------------------------------- pan & zoom
  function setView() { svg.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`); }
  function fit() {
    const b = bbox(data.nodes.length ? data.nodes : [{ x: 0, y: 0, w: 100, h: 40 }]);
    const r = svg.getBoundingClientRect(), aspect = (r.height || 800) / (r.width || 1000);
    let w = b.x1 - b.x0 + 80, h = b.y1 - b.y0 + 80;
    if (h / w > aspect) w = h / aspect; else h = w * aspect;
    // very tall graphs start at the top, readable, rather than fitted to a speck
    if (h > 6000) { h = 2000; w = h / aspect; view = { x: (b.x0 + b.x1) / 2 - w / 2, y: b.y0 - 40, w, h }; }
    else view = { x: (b.x0 + b.x1) / 2 - w / 2, y: (b.y0 + b.y1) / 2 - h / 2, w, h };
    setView();
  }
  function center(x, y) { view.x = x - view.w / 2; view.y = y - view.h / 2; setView(); }
  svg.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const r = svg.getBoundingClientRect(), k = ev.deltaY > 0 ? 1.15 : 1 / 1.15;
    const px = view.x + (ev.clientX - r.left) / r.width * view.w, py = view.y + (ev.clientY - r.top) / r.height * view.h;
    view = { x: px - (px - view.x) * k, y: py - (py - view.y) * k, w: view.w * k, h: view.h * k };
    setView();
  }, { passive: false });
  let drag = null;
  svg.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y }; });
  window.addEventListener("mouseup", () => { drag = null; });
  window.addEventListener("mousemove", (ev) => {
    if (!drag) return;
    const r = svg.getBoundingClientRect();
    view.x = drag.vx - (ev.clientX - drag.x) / r.width * view.w;
    view.y = drag.vy - (ev.clientY - drag.y) / r.height * view.h;
    setView();
  });
  document.getElementById("fit").addEventListener("click", fit);
  document.getElementById("collapse-all").addEventListener("click", () => { data.blocks.forEach((b) => collapsed.add(b)); render(); });
  document.getElementById("expand-all").addEventListener("click", () => { collapsed.clear(); render(); });

  // --------------------------------------------------------- memory timeline
  function memory() {
    const p = data.plan, box = document.getElementById("memory");
    if (!p) return;
    const acts = p.buffers.filter((b) => b.kind === "activation"), weights = p.buffers.filter((b) => b.kind === "weight");
    const W = 350, H = 240, ml = 40, mt = 22;
    const lo = acts.length ? Math.min(...acts.map((b) => b.offset)) : 0;
    const hi = acts.length ? Math.max(...acts.map((b) => b.offset + b.size)) : 1;
    const s = el("svg", { width: W, height: H + 120, id: "timeline" }, box);
    const title = el("text", { x: 2, y: 12, "font-size": 11 }, s);
    title.textContent = `activations: ${acts.length} buffers, offsets ${lo}..${hi} B; arena ${p.arena} B, lower bound ${p.lower_bound} B`;
    const sx = (W - ml) / Math.max(1, p.steps + 1), sy = (H - mt) / Math.max(1, hi - lo);
    acts.forEach((b, i) => {
      const r = el("rect", { class: "buf", "data-node": b.node, x: ml + b.birth * sx, y: mt + (hi - b.offset - b.size) * sy,
        width: Math.max(1, (b.death - b.birth + 1) * sx), height: Math.max(1, b.size * sy),
        fill: `hsl(${(i * 137.5) % 360},60%,65%)` }, s);
      el("title", {}, r).textContent = `${b.label}: ${b.size} B at ${b.offset}, steps ${b.birth}..${b.death}`;
      r.addEventListener("click", () => { if (byId.has(b.node)) { const n = byId.get(b.node); center(n.x, n.y); select(b.node); } });
      if (b.size * sy > 10 && (b.death - b.birth + 1) * sx > 40) {
        const t = el("text", { x: ml + b.birth * sx + 2, y: mt + (hi - b.offset - b.size) * sy + 10, "font-size": 9 }, s);
        t.textContent = b.label;
      }
    });
    const wt = weights.reduce((a, b) => a + b.size, 0);
    const t2 = el("text", { x: 2, y: H + 20, "font-size": 11 }, s);
    t2.textContent = `weights: ${weights.length} buffers, ${wt} B (kept apart: live for the whole run)`;
    let x = ml;
    weights.sort((a, b) => b.size - a.size).forEach((b, i) => {
      const w = Math.max(1, (W - ml) * b.size / Math.max(1, wt));
      const r = el("rect", { class: "buf", "data-node": b.node, x: x, y: H + 28, width: w, height: 24, fill: `hsl(40,${40 + (i * 7) % 40}%,70%)` }, s);
      el("title", {}, r).textContent = `${b.label}: ${b.size} B at ${b.offset}`;
      x += w;
    });
  }

  render();
  memory();
  fit();
})();
