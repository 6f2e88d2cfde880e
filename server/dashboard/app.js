// privrl dashboard: polls the server's public read-only API and draws plain SVG.
// No framework, no CDN; every value is written with textContent or as an SVG attribute.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
// one colour and label per trust boundary, as in every figure privrl draws: read once from the
// server's registry (GET /v1/trust); runs of one boundary differ by dash pattern
const BOUNDARIES = new Map();  // name -> {label, colour, private}
const DASHES = ["", "7 3", "2 2", "9 3 2 3", "4 4", "12 3"];
const SHORT_ID = 6;  // characters of a run id shown in labels (the full id is in the tooltip)
const WINDOW = 100;  // episodes of the charts' moving mean (the table shows the verdict's window)
const MAX_POINTS = 500;  // points per drawn curve (longer series are thinned)

const state = {
  runs: new Map(),       // id -> RunInfo
  order: [],             // run ids, oldest first (fixes each run's colour and dash)
  selected: new Set(),
  rate: new Map(),       // id -> {t, reported, value}
  ledger: new Map(),     // id -> LedgerView
  regret: new Map(),     // id -> {reported, world, view | error}
  cohorts: new Map(),    // id -> CohortsView (runs whose boundary sums cohorts of users)
  billboard: null,
  detail: null,
  timer: null,
  busy: false,
};

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, text = null) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4))
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = String(text);
  return node;
}

async function getJSON(path) {
  const resp = await fetch(path, { headers: { Accept: "application/json" } });
  if (!resp.ok) {
    let detail = `HTTP ${resp.status}`;
    try { detail = (await resp.json()).detail || detail; } catch (_) { /* not JSON */ }
    const err = new Error(detail);
    err.status = resp.status;
    throw err;
  }
  return resp.json();
}

function num(x) {
  if (typeof x === "string") return /inf/i.test(x) ? Infinity : Number(x);
  return x;
}

function fmt(x, digits = 3) {
  x = num(x);
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  if (!Number.isFinite(x)) return "∞";
  if (x !== 0 && (Math.abs(x) >= 1e5 || Math.abs(x) < 1e-3)) return x.toExponential(1);
  return String(Number(x.toPrecision(digits)));
}

function styleOf(id) {
  const i = Math.max(0, state.order.indexOf(id));
  const run = state.runs.get(id);
  const boundary = run && BOUNDARIES.get(run.config.privacy);
  const color = (boundary && boundary.colour) || "#555";
  return { color, dash: DASHES[i % DASHES.length] };
}

function shortId(id) {
  return id.slice(0, SHORT_ID);
}

function privacyLabel(run) {
  const c = run.config;
  const pooled = c.knobs && c.knobs.pooled ? " pooled" : "";
  const boundary = BOUNDARIES.get(c.privacy);
  const name = boundary ? boundary.label : c.privacy;
  if (boundary && !boundary.private) return `${name}${pooled}`;
  return `${name} ε=${fmt(c.epsilon)} ${c.mechanism}${pooled}`;
}

function label(run) {
  // algorithm, privacy mode, epsilon and a short id: "dp-ucbvi · JDP ε=10 gaussian · 3f9a1c"
  return `${run.config.algo} · ${privacyLabel(run)} · ${shortId(run.id)}`;
}

// ---------------------------------------------------------------- polling

async function refresh() {
  if (state.busy) return;
  state.busy = true;
  const status = $("status");
  try {
    if (BOUNDARIES.size === 0) {
      for (const b of await getJSON("/v1/trust")) BOUNDARIES.set(b.name, b);
    }
    const list = await getJSON("/v1/runs");
    const now = Date.now() / 1000;
    const ids = new Set(list.runs.map((r) => r.id));
    for (const id of [...state.runs.keys()]) {
      if (!ids.has(id)) { state.runs.delete(id); state.selected.delete(id); }
    }
    for (const run of list.runs.sort((a, b) => a.created_at - b.created_at)) {
      if (!state.order.includes(run.id)) {
        state.order.push(run.id);
        state.selected.add(run.id);  // a new run is shown at once
      }
      updateRate(run, now);
      state.runs.set(run.id, run);
    }
    await Promise.all([...state.runs.values()].map(readRun));
    await readBillboard();
    render();
    status.className = "status";
    status.textContent = `${state.runs.size} run(s); updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    status.className = "status error";
    status.textContent = `cannot read the server: ${err.message}`;
  } finally {
    state.busy = false;
  }
}

function updateRate(run, now) {
  const last = state.rate.get(run.id);
  const reported = run.status.reported;
  if (!last) { state.rate.set(run.id, { t: now, reported, value: null }); return; }
  const dt = now - last.t;
  if (dt < 0.5) return;
  const instant = (reported - last.reported) / dt;
  const value = run.status.finished && instant === 0 ? last.value
    : (last.value === null ? instant : 0.5 * last.value + 0.5 * instant);
  state.rate.set(run.id, { t: now, reported, value });
}

async function readRun(run) {
  const jobs = [];
  const old = state.ledger.get(run.id);
  if (!old || old.reported !== run.status.reported) {
    jobs.push(getJSON(`/v1/runs/${encodeURIComponent(run.id)}/ledger`).then((view) => {
      view.reported = run.status.reported;
      state.ledger.set(run.id, view);
    }));
  }
  const boundary = BOUNDARIES.get(run.config.privacy);
  const cohorts = state.cohorts.get(run.id);
  if (boundary && boundary.cohorts && !(cohorts && cohorts.finished)) {
    // cohorts form between reports (members join, rounds close): read them on every refresh
    // until the run has finished and its last cohort ended
    jobs.push(getJSON(`/v1/runs/${encodeURIComponent(run.id)}/cohorts`).then((view) => {
      view.finished = run.status.finished && view.counts.in_flight === 0;
      state.cohorts.set(run.id, view);
    }));
  }
  const world = $("world").value.trim();
  const known = state.regret.get(run.id);
  if (world && (!known || known.reported !== run.status.reported || known.world !== world)) {
    const path = `/v1/runs/${encodeURIComponent(run.id)}/regret?world=${encodeURIComponent(world)}`;
    jobs.push(getJSON(path).then(
      (view) => state.regret.set(run.id, { reported: run.status.reported, world, view }),
      (err) => state.regret.set(run.id, { reported: run.status.reported, world,
        error: err.message }),
    ));
  }
  await Promise.all(jobs);
}

async function readBillboard() {
  const select = $("detail-run");
  const ids = state.order.filter((id) => state.runs.has(id));
  if (!state.detail || !state.runs.has(state.detail)) state.detail = ids[0] || null;
  if (select.options.length !== ids.length || [...select.options].some((o, i) => o.value !== ids[i])) {
    select.replaceChildren(...ids.map((id) => el("option", { value: id },
      label(state.runs.get(id)))));
  }
  select.value = state.detail || "";
  if (!state.detail) { state.billboard = null; return; }
  state.billboard = await getJSON(`/v1/runs/${encodeURIComponent(state.detail)}/billboard`);
}

// ---------------------------------------------------------------- derived numbers

function percentages(view) {
  const rnd = view.random_policy_per_episode;
  return view.regret.map((r) => (rnd > 0 ? (100 * r) / rnd : 0));
}

function moving(values, window) {
  const mean = [];
  const std = [];
  let s1 = 0;
  let s2 = 0;
  for (let k = 0; k < values.length; k++) {
    s1 += values[k];
    s2 += values[k] * values[k];
    if (k >= window) { s1 -= values[k - window]; s2 -= values[k - window] * values[k - window]; }
    const n = Math.min(k + 1, window);
    const m = s1 / n;
    mean.push(m);
    std.push(Math.sqrt(Math.max(s2 / n - m * m, 0)));
  }
  return { mean, std };
}

function thin(n) {
  const step = Math.max(1, Math.ceil(n / MAX_POINTS));
  const idx = [];
  for (let i = 0; i < n; i += step) idx.push(i);
  if (n && idx[idx.length - 1] !== n - 1) idx.push(n - 1);
  return idx;
}

// ---------------------------------------------------------------- rendering

function render() {
  renderTable();
  renderCharts();
  renderCohorts();
  renderBillboard();
}

function renderCohorts() {
  // each run that sums cohorts of users: its assumptions, its cohorts by outcome and the latest
  // cohorts forming (members so far of B, the open round, survivors, outcome): counts only
  const box = $("cohorts");
  const parts = [];
  for (const id of state.order) {
    const run = state.runs.get(id);
    const view = state.cohorts.get(id);
    if (!run || !view) continue;
    const style = styleOf(id);
    const fig = el("figure", { class: "cohorts", "data-run": id });
    const head = el("figcaption");
    const swatch = el("span", { class: "swatch" });
    swatch.style.borderTopColor = style.color;
    swatch.style.borderTopStyle = style.dash ? "dashed" : "solid";
    const n = view.counts;
    head.append(swatch, document.createTextNode(`${label(run)}: ${n.released} released,`
      + ` ${n.refused} refused, ${n.aborted} aborted, ${n.in_flight} forming`));
    const assumptions = el("p", { class: "assumptions" },
      `B = ${view.size} users per cohort; dropout ≤ ${fmt(view.dropout)},`
      + ` collusion ≤ ${fmt(view.collusion)} of a cohort: ≥ ${view.min_survivors} inputs to`
      + ` release, ≥ ${view.honest_shares} honest ${view.noise} noise shares`);
    const table = el("table", { class: "cohort-table" });
    const header = el("tr");
    for (const name of ["cohort", "members / B", "round", "survivors", "outcome"]) {
      header.append(el("th", {}, name));
    }
    table.append(header);
    for (const item of view.cohorts.slice().reverse()) {  // newest first
      const tr = el("tr", { "data-cohort": item.cohort, class: item.outcome || "forming" });
      tr.append(el("td", {}, item.cohort), el("td", {}, `${item.members} / ${view.size}`),
        el("td", { class: "text" }, item.round), el("td", {}, item.survivors),
        el("td", { class: "text outcome" }, item.outcome || "forming"));
      table.append(tr);
    }
    fig.append(head, assumptions, table);
    parts.push(fig);
  }
  box.replaceChildren(...parts);
  $("cohorts-section").hidden = parts.length === 0;
}

function renderTable() {
  const body = $("runs").tBodies[0];
  const rows = [];
  for (const id of state.order) {
    const run = state.runs.get(id);
    if (!run) continue;
    const c = run.config;
    const st = run.status;
    const led = state.ledger.get(id);
    const reg = state.regret.get(id);
    const style = styleOf(id);
    const tr = el("tr", { "data-run": id });
    const box = el("input", { type: "checkbox", "aria-label": `show ${id}` });
    box.checked = state.selected.has(id);
    box.addEventListener("change", () => {
      if (box.checked) state.selected.add(id); else state.selected.delete(id);
      render();
    });
    const show = el("td");
    show.append(box);
    const name = el("td", { class: "run text", title: `run ${id}: show its billboard` });
    const swatch = el("span", { class: "swatch" });
    swatch.style.borderTopColor = style.color;
    swatch.style.borderTopStyle = style.dash ? "dashed" : "solid";
    name.append(swatch, document.createTextNode(shortId(id)));
    name.addEventListener("click", () => { state.detail = id; refresh(); });
    const algo = el("td", { class: "text algo" }, c.algo);
    const privacy = el("td", { class: "text privacy" }, privacyLabel(run));
    const budget = el("td", {}, c.privacy === "none" ? "–" : `${fmt(c.epsilon)} / ${fmt(c.delta)}`);
    const spent = el("td", { class: "spent" },
      c.privacy === "none" ? "0 (non-private)"
        : (led ? `${fmt(led.epsilon, 4)} / ${fmt(led.delta)}` : "…"));
    const progress = el("td", { class: "progress" });
    const bar = el("span", { class: "bar" });
    const fill = el("span");
    fill.style.width = `${(100 * st.reported) / st.episodes}%`;
    bar.append(fill);
    progress.append(bar, document.createTextNode(
      `${st.reported} / ${st.episodes}${st.finished ? " ✓" : ""}`));
    const rate = state.rate.get(id);
    const cells = [show, name, algo, privacy, budget, spent, progress,
      el("td", {}, st.outstanding),
      el("td", { class: "rate" }, rate && rate.value !== null ? fmt(rate.value, 3) : "…"),
      el("td", {}, st.policy_version)];
    const v = reg && reg.view ? reg.view.verdict : null;
    if (v) {  // the server's verdict: the CLI's rule, from the same library function
      const pct = v.percent_of_random === null ? "–" : `${v.percent_of_random.toFixed(1)}%`;
      const windows = v.windows.map((w) => `${w.toFixed(0)}%`).join(", ");
      cells.push(el("td", { title: `last ${v.tail_episodes} episodes` },
        fmt(v.tail_regret_per_episode, 3)),
        el("td", { class: "percent" }, pct),
        el("td", { class: "learned", title: `${v.rule}; windows: ${windows}` }, v.learned));
    } else {
      const why = reg && reg.error ? reg.error : "no reported episode yet";
      cells.push(el("td", { class: "muted", title: why }, "–"),
        el("td", { class: "muted", title: why }, "–"),
        el("td", { class: "muted", title: why }, "–"));
    }
    tr.append(...cells);
    rows.push(tr);
  }
  body.replaceChildren(...rows);
  $("empty").hidden = rows.length > 0;
}

function selectedRuns() {
  return state.order.filter((id) => state.selected.has(id) && state.runs.has(id));
}

function renderCharts() {
  const ids = selectedRuns();
  const cumulative = [];
  const percent = [];
  const epsilon = [];
  let random = null;
  let episodes = 0;
  for (const id of ids) {
    const style = styleOf(id);
    const run = state.runs.get(id);
    const reg = state.regret.get(id);
    episodes = Math.max(episodes, run.status.reported);
    if (reg && reg.view && reg.view.regret.length) {
      const r = reg.view.regret;
      random = reg.view.random_policy_per_episode;
      let total = 0;
      const cum = r.map((x) => (total += x));
      const idx = thin(r.length);
      cumulative.push({ id, ...style, points: idx.map((i) => [i + 1, cum[i]]) });
      const { mean, std } = moving(percentages(reg.view), WINDOW);
      percent.push({ id, ...style, points: idx.map((i) => [i + 1, mean[i]]),
        band: idx.map((i) => [i + 1, Math.max(0, mean[i] - std[i]), mean[i] + std[i]]) });
    }
    const led = state.ledger.get(id);
    if (run.config.privacy !== "none" && led) {
      const pts = [[0, 0]];
      led.charges.forEach((ch, i) => {
        const at = ch.at === null || ch.at === undefined ? 0 : ch.at;
        pts.push([at, pts[pts.length - 1][1]], [at, num(led.epsilon_after[i])]);
      });
      pts.push([run.status.reported, pts[pts.length - 1][1]]);
      epsilon.push({ id, ...style, points: pts });
    }
  }
  const refs = random === null ? [] : [{ slope: random, label: "uniformly random policy" }];
  lineChart($("chart-cumulative"), cumulative, { xmax: episodes, lines: refs, ylabel: "regret" });
  lineChart($("chart-percent"), percent, { xmax: episodes, ymin: 0, ymax: 125, ticks: 5,
    hlines: [{ y: 100, label: "random (100%)" }, { y: 0, label: "optimal (0%)" }],
    ylabel: "% of random" });
  lineChart($("chart-epsilon"), epsilon, { xmax: episodes, ymin: 0, ylabel: "ε spent" });
  const legend = $("legend");
  legend.replaceChildren(...ids.map((id) => {
    const style = styleOf(id);
    const item = el("span");
    const swatch = el("span", { class: "swatch" });
    swatch.style.borderTopColor = style.color;
    swatch.style.borderTopStyle = style.dash ? "dashed" : "solid";
    item.append(swatch, document.createTextNode(label(state.runs.get(id))));
    return item;
  }));
}

function lineChart(svg, series, opts) {
  const W = 432;
  const H = 272;
  const m = { l: 52, r: 26, t: 10, b: 30 };  // r: room for the last x label (centred)
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const xmax = Math.max(1, opts.xmax || 1);
  let ymax = opts.ymax;
  if (ymax === undefined) {
    ymax = 0;
    for (const s of series) for (const p of s.points) ymax = Math.max(ymax, p[1]);
    for (const l of opts.lines || []) ymax = Math.max(ymax, l.slope * xmax);
    ymax = ymax > 0 ? ymax * 1.05 : 1;
  }
  const ymin = opts.ymin !== undefined ? opts.ymin : 0;
  const X = (x) => m.l + ((W - m.l - m.r) * x) / xmax;
  const Y = (y) => H - m.b - ((H - m.t - m.b) * (Math.min(Math.max(y, ymin), ymax) - ymin))
    / (ymax - ymin);
  const nodes = [];
  const grid = el("svg:g", { class: "grid" });
  const axis = el("svg:g", { class: "axis" });
  const ticks = opts.ticks || 4;
  for (let i = 0; i <= ticks; i++) {
    const y = ymin + ((ymax - ymin) * i) / ticks;
    grid.append(el("svg:line", { x1: m.l, x2: W - m.r, y1: Y(y), y2: Y(y) }));
    axis.append(el("svg:text", { x: m.l - 4, y: Y(y) + 3, "text-anchor": "end" }, fmt(y, 3)));
  }
  for (let i = 0; i <= 4; i++) {
    const x = (xmax * i) / 4;
    axis.append(el("svg:text", { x: X(x), y: H - m.b + 13, "text-anchor": "middle" },
      String(Math.round(x))));
  }
  axis.append(el("svg:line", { x1: m.l, x2: m.l, y1: m.t, y2: H - m.b }));
  axis.append(el("svg:line", { x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b }));
  axis.append(el("svg:text", { x: (W + m.l) / 2, y: H - 4, "text-anchor": "middle" }, "episode"));
  axis.append(el("svg:text", { x: 10, y: (H - m.b) / 2, transform: `rotate(-90 10 ${(H - m.b) / 2})`,
    "text-anchor": "middle" }, opts.ylabel || ""));
  nodes.push(grid, axis);
  for (const h of opts.hlines || []) {
    nodes.push(el("svg:line", { x1: m.l, x2: W - m.r, y1: Y(h.y), y2: Y(h.y), stroke: "#777",
      "stroke-dasharray": "1 3", class: "reference" }));
  }
  for (const l of opts.lines || []) {
    nodes.push(el("svg:line", { x1: X(0), y1: Y(0), x2: X(xmax), y2: Y(l.slope * xmax),
      stroke: "#777", "stroke-dasharray": "1 3", class: "reference" }));
  }
  for (const s of series) {
    if (s.band && s.band.length > 1) {
      const upper = s.band.map((p) => `${X(p[0]).toFixed(1)},${Y(p[2]).toFixed(1)}`);
      const lower = s.band.slice().reverse().map((p) => `${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`);
      nodes.push(el("svg:polygon", { points: upper.concat(lower).join(" "), fill: s.color,
        "fill-opacity": 0.15, stroke: "none", class: "band", "data-run": s.id }));
    }
  }
  for (const s of series) {
    if (!s.points.length) continue;
    const d = s.points.map((p, i) => `${i ? "L" : "M"}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`);
    nodes.push(el("svg:path", { d: d.join(""), fill: "none", stroke: s.color, "stroke-width": 2,
      "stroke-dasharray": s.dash, class: "series", "data-run": s.id,
      "data-points": s.points.length, "data-last-x": s.points[s.points.length - 1][0] }));
  }
  svg.replaceChildren(...nodes);
}

function renderBillboard() {
  const box = $("heatmaps");
  const text = $("detail-text");
  const bb = state.billboard;
  const run = bb && state.runs.get(bb.run_id);
  if (!bb || !run) { box.replaceChildren(); text.textContent = ""; return; }
  const shape = bb.shapes.sa;
  if (!shape) {
    box.replaceChildren();
    text.textContent = "This algorithm's billboard has no N(s,a) counts to draw.";
    return;
  }
  const [hp, S, A] = shape;
  const led = state.ledger.get(run.id);
  const released = new Set((led ? Object.keys(led.by_mechanism) : []).map((k) => k.split(":").pop()));
  const derived = !released.has("sa") && bb.shapes.sas;
  const std = bb.noise_std * (derived ? Math.sqrt(bb.shapes.sas[bb.shapes.sas.length - 1]) : 1);
  const values = bb.arrays.sa;
  const rows = [];
  const rowNames = [];
  if (hp === 1) {
    for (let s = 0; s < S; s++) { rows.push(values.slice(s * A, (s + 1) * A)); rowNames.push(`s=${s}`); }
  } else {
    for (let h = 0; h < hp; h++) {
      rows.push(values.slice(h * S * A, (h + 1) * S * A));
      rowNames.push(`h=${h + 1}`);
    }
  }
  const cols = hp === 1 ? [...Array(A).keys()].map((a) => `a=${a}`)
    : [...Array(S * A).keys()].map((j) => `${Math.floor(j / A)},${j % A}`);
  const counts = heatmap(`released Ñ${hp === 1 ? "(s,a), pooled over h" : "_h(s,a)"} after ${bb.reported} reports`,
    rows, rowNames, cols, "counts");
  const parts = [counts];
  if (std > 0) {
    parts.push(heatmap(`Ñ / noise std (${fmt(std, 4)}): below 1 the learner treats a cell as unvisited`,
      rows.map((r) => r.map((v) => v / std)), rowNames, cols, "snr"));
  }
  box.replaceChildren(...parts);
  text.textContent = `${label(run)}: ${bb.reported} reports; each released entry carries noise of`
    + ` std ${fmt(bb.noise_std, 4)} (public: it follows from the calibration alone)`
    + (derived ? `; Ñ(s,a) is derived by summing ${bb.shapes.sas[bb.shapes.sas.length - 1]}`
      + ` released N(s,a,s') entries, std ${fmt(std, 4)}` : "")
    + `; confidence radius ${fmt(bb.radius, 4)}.`;
}

function heatmap(title, rows, rowNames, colNames, kind) {
  const cell = Math.max(8, Math.min(28, Math.floor(360 / Math.max(1, colNames.length))));
  const ch = Math.max(8, Math.min(22, Math.floor(300 / Math.max(1, rows.length))));
  const left = 40;
  const top = 14;
  const gridW = cell * colNames.length;
  const gridH = Math.max(ch * rows.length, 60);  // the colour bar needs some height
  const bar = { x: left + gridW + 12, w: 12, steps: 24 };
  const W = bar.x + bar.w + 52;  // room for the bar's labels
  const H = top + gridH + 8;
  let lo = Infinity;
  let hi = -Infinity;
  for (const r of rows) for (const v of r) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  if (!(hi > lo)) hi = lo + 1;
  const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: `heatmap ${kind}` });
  rows.forEach((r, i) => {
    svg.append(el("svg:text", { x: left - 3, y: top + ch * i + ch / 2 + 3, "text-anchor": "end" },
      rowNames[i]));
    r.forEach((v, j) => {
      const t = (v - lo) / (hi - lo);
      const rect = el("svg:rect", { x: left + cell * j, y: top + ch * i, width: cell - 1,
        height: ch - 1, fill: shade(t), class: "cell" });
      rect.append(el("svg:title", {}, `${rowNames[i]}, ${colNames[j]}: ${fmt(v, 4)}`));
      svg.append(rect);
    });
  });
  if (colNames.length <= 16) {
    colNames.forEach((name, j) => svg.append(el("svg:text", { x: left + cell * j + cell / 2, y: 10,
      "text-anchor": "middle" }, name)));
  }
  svg.append(colorBar(bar, top, gridH, lo, hi));
  const fig = el("figure");
  fig.append(el("figcaption", {}, `${title} (${fmt(lo, 3)} … ${fmt(hi, 3)})`), svg);
  return fig;
}

function colorBar(bar, top, height, lo, hi) {
  // the scale of the cells' colours: hi at the top, lo at the bottom, three labelled ticks
  const g = el("svg:g", { class: "colorbar" });
  const step = height / bar.steps;
  for (let k = 0; k < bar.steps; k++) {
    g.append(el("svg:rect", { x: bar.x, y: top + height - (k + 1) * step, width: bar.w,
      height: step + 0.5, fill: shade((k + 0.5) / bar.steps) }));
  }
  g.append(el("svg:rect", { x: bar.x, y: top, width: bar.w, height, fill: "none",
    stroke: "#999", class: "frame" }));
  for (const f of [0, 0.5, 1]) {
    const y = top + height - f * height;
    g.append(el("svg:line", { x1: bar.x + bar.w, x2: bar.x + bar.w + 3, y1: y, y2: y,
      stroke: "#999" }));
    g.append(el("svg:text", { x: bar.x + bar.w + 5, y: y + 3, class: "tick" },
      fmt(lo + f * (hi - lo), 3)));
  }
  return g;
}

function shade(t) {
  // light yellow -> teal -> dark blue
  const stops = [[255, 255, 204], [65, 182, 196], [37, 52, 148]];
  const x = Math.min(Math.max(t, 0), 1) * (stops.length - 1);
  const i = Math.min(Math.floor(x), stops.length - 2);
  const f = x - i;
  const c = stops[i].map((v, k) => Math.round(v + f * (stops[i + 1][k] - v)));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

// ---------------------------------------------------------------- wiring

function schedule() {
  if (state.timer) clearInterval(state.timer);
  const every = Number($("every").value);
  state.timer = every > 0 ? setInterval(refresh, every) : null;
}

$("every").addEventListener("change", schedule);
$("world").addEventListener("change", () => { state.regret.clear(); refresh(); });
$("detail-run").addEventListener("change", (e) => { state.detail = e.target.value; refresh(); });
schedule();
refresh();
