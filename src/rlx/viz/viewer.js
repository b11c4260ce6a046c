// The rlx graph viewer: draws the JSON in #rlx-data as SVG. No external resources.
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const data = JSON.parse(document.getElementById("rlx-data").textContent);
  const svg = document.getElementById("graph");
  // every node, top level and inside control-flow bodies, by key ("12", "12/then_branch/3"), with the
  // chain of nodes whose bodies must be open to show it
  const byKey = new Map(), owners = new Map();
  (function index(nodes, chain) {
    for (const n of nodes) {
      n.key = n.key || String(n.id);
      byKey.set(n.key, n);
      owners.set(n.key, chain);
      for (const b of n.bodies || []) index(b.nodes, chain.concat([n.key]));
    }
  })(data.nodes, []);
  const collapsed = new Set(data.collapsed ? data.blocks : []);
  const open = new Set();
  const pos = new Map();  // drawn key -> {x, y} in page coordinates (bodies are drawn offset)
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

  // what is drawn for a top-level node: itself, or its collapsed block
  function unitOf(n) { return n.block && collapsed.has(n.block) ? "b:" + n.block : "n:" + n.key; }

  function drawBox(u, key, parent) {
    const n = u.node;
    const cls = "node" + (n ? (n.kind === "input" ? " leaf" : "") + (n.output ? " out" : "") +
      (n.bodies ? " has-body" + (open.has(n.key) ? " open" : "") : "") : " block") + (n && selected === n.key ? " sel" : "");
    const g = el("g", { class: cls, "data-key": key, transform: `translate(${u.x - u.w / 2},${u.y})` }, parent);
    el("rect", { width: u.w, height: u.h, fill: n ? data.colors[n.kind] || "#fff" : data.colors.block }, g);
    const lines = u.label.split("\n");
    if (n && n.bodies) lines[0] += open.has(n.key) ? "  ⊟" : "  ⊞";
    lines.forEach((line, i) => {
      const t = el("text", { x: u.w / 2, y: (u.h - 13 * lines.length) / 2 + 11 + 13 * i, "text-anchor": "middle" }, g);
      t.textContent = line;
    });
    el("title", {}, g).textContent = n ? n.details.map((r) => r[0] + ": " + r[1]).join("\n") +
      (n.bodies ? "\n(click to " + (open.has(n.key) ? "close" : "open") + " its bodies)" : "") : u.label + " — click to expand";
    g.addEventListener("click", (ev) => {
      ev.stopPropagation();
      if (!n) { collapsed.delete(u.block); render(); return; }
      if (n.bodies) { if (open.has(n.key)) open.delete(n.key); else open.add(n.key); render(); }
      select(n.key);
    });
  }

  function drawEdge(u, v, title, parent) {
    const y0 = u.y + u.h, y1 = v.y, my = (y0 + y1) / 2;
    const p = el("path", { class: "edge", d: `M${u.x},${y0} C${u.x},${my} ${v.x},${my} ${v.x},${y1}` }, parent);
    el("title", {}, p).textContent = title;
  }

  // the open bodies of a node, side by side to its right, each in a frame (page coordinates ox, oy)
  function drawBodies(n, ox, oy, layer) {
    let x = ox;
    for (const b of n.bodies) {
      const [bx0, by0, bx1, by1] = b.box, pad = 16, h = by1 - by0 + 2 * pad + 18;
      const w = Math.max(bx1 - bx0 + 2 * pad, b.title.length * 7 + 24);  // wide enough for its title
      const g = el("g", { class: "body", "data-owner": n.key, transform: `translate(${x - bx0 + pad},${oy - by0 + pad + 18})` }, layer);
      el("rect", { class: "body-frame", x: bx0 - pad, y: by0 - pad - 18, width: w, height: h, rx: 8 }, g);
      const t = el("text", { class: "block-title", x: bx0 - pad + 6, y: by0 - pad - 4 }, g);
      t.textContent = "▾ " + b.title;
      t.addEventListener("click", (ev) => { ev.stopPropagation(); open.delete(n.key); render(); });
      const edgesG = el("g", {}, g), nodesG = el("g", {}, g);
      const dx = x - bx0 + pad, dy = oy - by0 + pad + 18;
      const local = new Map(b.nodes.map((m) => [m.key, m]));
      for (const [src, dst, label] of b.edges) drawEdge(local.get(src), local.get(dst), `${src} → ${dst}: ${label}`, edgesG);
      for (const m of b.nodes) {
        drawBox({ x: m.x, y: m.y, w: m.w, h: m.h, label: m.label, node: m }, "n:" + m.key, nodesG);
        pos.set(m.key, { x: m.x + dx, y: m.y + dy });
      }
      for (const m of b.nodes) if (m.bodies && open.has(m.key)) drawBodies(m, m.x + dx + m.w / 2 + 40, m.y + dy, layer);
      x += w + 24;
    }
  }

  function render() {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    pos.clear();
    const frames = el("g", {}, svg), edgesG = el("g", {}, svg), nodesG = el("g", {}, svg), bodiesG = el("g", {}, svg);
    const units = new Map();
    const members = new Map();
    for (const n of data.nodes) {
      if (n.block) { if (!members.has(n.block)) members.set(n.block, []); members.get(n.block).push(n); }
    }
    // a collapsed block takes one row: the vertical span of its members is squashed out of the layout
    // (the middle half of its members' rows: a few stragglers, e.g. weight reshapes laid out at the top, do not
    // stretch a block over the whole graph)
    function middle(ms) {
      const ys = ms.map((m) => m.y).sort((a, b) => a - b), xs = ms.map((m) => m.x).sort((a, b) => a - b);
      const at = (v, q) => v[Math.min(v.length - 1, Math.floor(q * v.length))];
      return { y0: at(ys, 0.25), y1: at(ys, 0.75) + 40, y: at(ys, 0.5), x: at(xs, 0.5) };
    }
    const spans = [], mids = new Map();
    for (const [name, ms] of members) {
      if (!collapsed.has(name)) continue;
      const m = middle(ms);
      mids.set(name, m);
      spans.push([m.y0, m.y1]);
    }
    spans.sort((p, q) => p[0] - q[0]);
    const merged = [];
    for (const sp of spans) {
      const last = merged[merged.length - 1];
      if (last && sp[0] <= last[1]) last[1] = Math.max(last[1], sp[1]); else merged.push(sp.slice());
    }
    function sy(y) {
      let shift = 0;
      for (const [a, b] of merged) {
        if (y >= b) shift += (b - a) - 50;
        else if (y >= a) return a - shift;
      }
      return y - shift;
    }
    const frameList = [];
    for (const [name, ms] of members) {
      const b = bbox(ms);
      if (collapsed.has(name)) {
        const w = Math.max(120, name.length * 7 + 40), m = mids.get(name);
        units.set("b:" + name, { x: m.x, y: sy(m.y0), w: w, h: 40, label: name + " (" + ms.length + " ops)", block: name });
      } else {
        frameList.push([name, b, sy(b.y0), sy(b.y1)]);
      }
    }
    // an input read only inside collapsed blocks is drawn with them when there are many (a model feeding its
    // weights as inputs stays narrow)
    const readers = new Map();
    for (const [src, dst] of data.edges) { if (!readers.has(src)) readers.set(src, []); readers.get(src).push(byKey.get(dst)); }
    const manyInputs = data.nodes.filter((n) => n.kind === "input").length > 8;
    const hidden = (n) => manyInputs && n.kind === "input" && collapsed.size > 0 && (readers.get(n.key) || []).length > 0 &&
      readers.get(n.key).every((m) => m.block && collapsed.has(m.block));
    for (const n of data.nodes) {
      if (unitOf(n)[0] === "n" && !hidden(n)) units.set("n:" + n.key, { x: n.x, y: sy(n.y), w: n.w, h: n.h, label: n.label, node: n });
    }
    // then no empty band taller than GAP is left between rows (the rows a collapsed block stood for)
    const GAP = 110, rows = [...new Set([...units.values()].map((u) => u.y))].sort((a, b) => a - b), moved = new Map();
    let shift = 0;
    rows.forEach((y, i) => { if (i && y - rows[i - 1] > GAP) shift += y - rows[i - 1] - GAP; moved.set(y, y - shift); });
    function gy(y) {  // any y: shifted like the row at or above it
      let lo = 0, hi = rows.length - 1, k = -1;
      while (lo <= hi) { const mid = (lo + hi) >> 1; if (rows[mid] <= y) { k = mid; lo = mid + 1; } else hi = mid - 1; }
      return k < 0 ? y : moved.get(rows[k]) + Math.min(y - rows[k], GAP);
    }
    for (const u of units.values()) u.y = moved.get(u.y);
    // an open node's bodies go right below it and push every lower row down by their height (in place, no overlap)
    const opened = [...units.values()].filter((u) => u.node && u.node.bodies && open.has(u.node.key)).sort((a, b) => a.y - b.y);
    const pushes = opened.map((u) => [u.y, Math.max(...u.node.bodies.map((b) => b.box[3] - b.box[1] + 2 * 16 + 18)) + 40]);
    const pushAt = (y) => pushes.reduce((acc, [at, h]) => acc + (y > at ? h : 0), 0);
    for (const u of units.values()) u.y += pushAt(u.y);
    for (const [name, b, y0s, y1s] of frameList) {
      const y0 = gy(y0s) + pushAt(gy(y0s)), y1 = gy(y1s) + pushAt(gy(y1s));
      el("rect", { class: "block-frame", x: b.x0 - 10, y: y0 - 22, width: b.x1 - b.x0 + 20, height: y1 - y0 + 32, rx: 8 }, frames);
      const t = el("text", { class: "block-title", x: b.x0 - 4, y: y0 - 8 }, frames);
      t.textContent = "▾ " + name;
      t.addEventListener("click", (ev) => { ev.stopPropagation(); collapsed.add(name); render(); });
    }
    const seen = new Set();
    for (const [src, dst, label] of data.edges) {
      const a = unitOf(byKey.get(src)), b = unitOf(byKey.get(dst));
      if (a === b || seen.has(a + ">" + b) || !units.has(a) || !units.has(b)) continue;
      seen.add(a + ">" + b);
      drawEdge(units.get(a), units.get(b), `%${src} → %${dst}: ${label}`, edgesG);
    }
    for (const [key, u] of units) {
      drawBox(u, key, nodesG);
      if (u.node) pos.set(u.node.key, { x: u.x, y: u.y });
      if (u.node && u.node.bodies && open.has(u.node.key)) drawBodies(u.node, u.x - u.w / 2, u.y + u.h + 24, bodiesG);
    }
    applySearch();
    document.body.setAttribute("data-rendered", String(units.size));
    document.body.setAttribute("data-open", String(svg.querySelectorAll(".body").length));
    drawn = [...units.values()];
    overview(units);
  }
  let drawn = [];

  function select(key) {
    selected = key;
    const n = byKey.get(key);
    const rows = n.details.map((r) => `<tr><td>${esc(r[0])}</td><td>${esc(r[1])}</td></tr>`).join("");
    const details = document.getElementById("details");
    details.innerHTML = `<table>${rows}</table>`;
    details.setAttribute("data-node", key);
    for (const g of svg.querySelectorAll(".node")) g.classList.toggle("sel", g.getAttribute("data-key") === "n:" + key);
    for (const r of document.querySelectorAll(".buf")) r.classList.toggle("sel", r.getAttribute("data-node") === String(key));
  }

  function esc(s) { return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]); }

  // ------------------------------------------------------------------ search
  let hits = [], hitIndex = -1;
  function applySearch() {
    const q = document.getElementById("search").value.trim().toLowerCase();
    const exact = q.length > 2 && q.startsWith('"') && q.endsWith('"') ? q.slice(1, -1) : null;  // "n12": that name only
    hits = !q ? [] : [...byKey.values()].filter((n) => (exact !== null ? n.search.split(" ").includes(exact) : n.search.includes(q)));
    const keys = new Set(hits.map((n) => (owners.get(n.key).length ? "n:" + n.key : unitOf(n))));
    for (const g of svg.querySelectorAll(".node")) g.classList.toggle("hit", keys.has(g.getAttribute("data-key")));
    document.getElementById("hits").textContent = q ? `${hits.length} match${hits.length === 1 ? "" : "es"}` : "";
  }
  // show a node: expand its block, open the bodies around it, center it and select it
  function reveal(n) {
    const top = byKey.get((owners.get(n.key)[0]) || n.key);
    let changed = false;
    if (top.block && collapsed.has(top.block)) { collapsed.delete(top.block); changed = true; }
    for (const k of owners.get(n.key)) if (!open.has(k)) { open.add(k); changed = true; }
    if (changed) render();
    const p = pos.get(n.key) || n;
    if (view.w > 1600) { const k = 1200 / view.w; view.w *= k; view.h *= k; }  // close enough to read the node
    center(p.x, p.y + n.h / 2);
    select(n.key);
  }
  document.getElementById("search").addEventListener("input", () => { hitIndex = -1; applySearch(); });
  document.getElementById("search").addEventListener("keydown", (ev) => {
    if (ev.key !== "Enter" || !hits.length) return;
    hitIndex = (hitIndex + 1) % hits.length;
    reveal(hits[hitIndex]);
  });

  // ---------------------------------------------------------------- overview
  let overviewBox = null;
  function overview(units) {
    const ov = document.getElementById("overview");
    if (!ov) return;
    while (ov.firstChild) ov.removeChild(ov.firstChild);
    const all = [...units.values()];
    if (!all.length) return;
    const b = bbox(all);
    overviewBox = { x0: b.x0 - 20, y0: b.y0 - 20, w: b.x1 - b.x0 + 40, h: b.y1 - b.y0 + 40 };
    ov.setAttribute("viewBox", `${overviewBox.x0} ${overviewBox.y0} ${overviewBox.w} ${overviewBox.h}`);
    ov.setAttribute("preserveAspectRatio", "xMidYMid meet");
    for (const u of all) {
      el("rect", { class: u.node ? "ov-node" : "ov-block", x: u.x - u.w / 2, y: u.y, width: u.w, height: Math.max(u.h, overviewBox.h / 300) }, ov);
    }
    el("rect", { id: "ov-view", x: view.x, y: view.y, width: view.w, height: view.h }, ov);
  }
  document.getElementById("overview").addEventListener("click", (ev) => {
    if (!overviewBox) return;
    ev.stopPropagation();
    const ov = document.getElementById("overview"), r = ov.getBoundingClientRect();
    const k = Math.max(overviewBox.w / r.width, overviewBox.h / r.height);
    const cx = overviewBox.x0 + overviewBox.w / 2 + (ev.clientX - r.left - r.width / 2) * k;
    const cy = overviewBox.y0 + overviewBox.h / 2 + (ev.clientY - r.top - r.height / 2) * k;
    center(cx, cy);
  });
  document.getElementById("overview").addEventListener("mousedown", (ev) => ev.stopPropagation());

  // ------------------------------------------------------------- pan & zoom
  function setView() {
    svg.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);
    const r = document.getElementById("ov-view");
    if (r) { r.setAttribute("x", view.x); r.setAttribute("y", view.y); r.setAttribute("width", view.w); r.setAttribute("height", view.h); }
  }
  function fit() {
    const b = bbox(drawn.length ? drawn : [{ x: 0, y: 0, w: 100, h: 40 }]);
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
      r.addEventListener("click", () => { const n = byKey.get(String(b.node)); if (n) { center(n.x, n.y); select(n.key); } });
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

  // the address can say what to show: #q=TEXT (search, go to the first match), #open=KEY (open a node's bodies)
  function fromHash() {
    const want = new URLSearchParams(location.hash.slice(1));
    for (const k of want.getAll("open")) if (byKey.has(k)) { for (const o of owners.get(k)) open.add(o); open.add(k); }
    if (want.getAll("open").length) render();
    const q = want.get("q");
    if (q) {
      document.getElementById("search").value = q;
      applySearch();
      if (hits.length) { hitIndex = 0; reveal(hits[0]); }
    }
  }

  render();
  memory();
  fit();
  fromHash();
})();
