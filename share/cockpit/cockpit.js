// The cockpit: a view of one root and task through the daemon's own API, kept live by the
// root's server-sent events. It writes only by starting a consultation of an existing
// assessment or cancelling a job. Every text from the daemon is set as text, never as HTML.
"use strict";
performance.mark("cockpit-start");

const PAGE = 50;
const TREE_PAGE = 20;
const state = {
  root: "", task: "", catalogue: "", stateDir: "",
  offset: 0, total: 0, treeOffset: 0,
  jobs: new Map(), advisors: [], painted: false,
  // The task the list shows and its record count (the daemon's default when none is named),
  // and the task names last listed: the Tasks panel is drawn from both.
  shown: { task: "", records: 0 }, taskNames: [], tasksKnown: false,
  // Each load's number: an answer older than one already drawn is dropped.
  asked: { tasks: 0, status: 0 }, drawn: { tasks: 0, status: 0 },
};

// Number a load of `what`; `fresh(what, n)` says whether its answer is still the newest.
function ask(what) { return ++state.asked[what]; }
function fresh(what, n) {
  if (n < state.drawn[what]) return false;
  state.drawn[what] = n;
  return true;
}

// ---- small helpers -------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
const $ = (id) => document.getElementById(id);
const badge = (text, cls) => el("span", { class: `badge s-${cls || text}` }, text);
const short = (id) => (id ? String(id).slice(-8) : "");

function query(extra) {
  const params = new URLSearchParams();
  params.set("root", state.root);
  if (state.task) params.set("task", state.task);
  if (state.catalogue) params.set("catalogue", state.catalogue);
  if (state.stateDir) params.set("state_dir", state.stateDir);
  for (const [k, v] of Object.entries(extra || {})) params.set(k, v);
  return params.toString();
}

async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let value = null;
  try { value = text ? JSON.parse(text) : null; } catch (_) { value = { message: text }; }
  if (!response.ok) {
    const message = (value && value.message) || response.statusText;
    throw new Error(`${response.status}: ${message}`);
  }
  return value;
}

function say(text, up) {
  const live = $("live");
  live.textContent = text;
  live.classList.toggle("up", !!up);
}

function seconds(ms) {
  if (ms < 0) ms = 0;
  const s = Math.round(ms / 1000);
  return s >= 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s} s`;
}

// ---- tasks and assessments -----------------------------------------------------------

async function loadTasks() {
  const n = ask("tasks");
  const list = await api("GET", `/api/v1/reasoning/tasks?${query()}`);
  if (!fresh("tasks", n)) return;
  state.taskNames = list.tasks;
  state.tasksKnown = true;
  renderTasks();
}

// The Tasks panel: the tasks listed, the one shown marked. The task the list below shows
// is always there once it has records, even when the listing was read before them.
function renderTasks() {
  const ul = $("tasks");
  const names = $("task-names");
  const shown = state.task || state.shown.task;
  const tasks = [...state.taskNames];
  if (state.shown.task && state.shown.records > 0 && !tasks.includes(state.shown.task)) {
    tasks.push(state.shown.task);
    tasks.sort();
  }
  ul.replaceChildren();
  names.replaceChildren();
  for (const name of tasks) {
    names.append(el("option", { value: name }));
    ul.append(el("li", {}, el("button", {
      type: "button", "aria-current": name === shown ? "true" : "false",
      onclick: () => { $("task").value = name; show(); },
    }, name)));
  }
  if (!tasks.length && state.tasksKnown) ul.append(el("li", { class: "muted" }, "No task has records yet."));
}

async function loadStatus() {
  const n = ask("status");
  const view = await api("GET", `/api/v1/reasoning?${query({ offset: state.offset, limit: PAGE })}`);
  if (!fresh("status", n)) return;
  state.shown = { task: view.task || state.task, records: view.records || 0 };
  renderTasks();
  state.total = view.page ? view.page.total : view.assessments.length;
  renderAssessments(view);
  renderDisagreements(view);
  if (!state.painted) {
    state.painted = true;
    requestAnimationFrame(() => performance.mark("cockpit-list-painted"));
  }
}

// The marker of an assessment that (or whose conclusion) cites a superseded conclusion as
// evidence and was not reaffirmed since (docs/records.md, "Downstream").
function restsOnSuperseded(a) {
  const ids = [...(a.rests_on_superseded || []),
    ...(a.conclusions || []).flatMap((c) => c.rests_on_superseded || [])];
  if (!ids.length) return null;
  return el("span", { class: "rests-on-superseded", title: `rests on superseded ${ids.join(", ")}` },
    " rests on a superseded decision");
}

// A task shared through a journal (docs/JOURNAL.md): its name, and how far behind this
// machine's replica may be while the bus is unreachable.
function journalNote(j) {
  if (!j) return "";
  if (j.reachable) return ` · shared through journal ${j.name}`;
  const at = j.current_at ? `last known current at ${j.current_at} (${j.current_s_ago} s ago, stream sequence ${j.stream_sequence})` : "not yet current with the journal";
  return ` · shared through journal ${j.name}, whose bus is UNREACHABLE: this replica was ${at} and may be behind; writes are refused until the bus is back`;
}

// Re-draw `box` with `draw`, keeping the keyboard's place: a control focused inside it is
// focused again in what is drawn, found by its label (the live views re-draw while the user
// tabs through them).
function keepingFocus(box, draw) {
  const active = document.activeElement;
  const label = active && box.contains(active) ? active.getAttribute("aria-label") : null;
  draw();
  if (label) {
    const again = [...box.querySelectorAll("[aria-label]")].find((n) => n.getAttribute("aria-label") === label);
    if (again) again.focus();
  }
}

function renderAssessments(view) {
  keepingFocus($("assessment-rows"), () => drawAssessments(view));
}

function drawAssessments(view) {
  const rows = $("assessment-rows");
  rows.replaceChildren();
  for (const a of view.assessments) {
    rows.append(el("tr", { "data-assessment": a.id },
      el("td", { class: "id" }, a.sequence),
      el("td", {}, a.subject),
      el("td", {}, a.materiality),
      el("td", {}, badge(a.state), restsOnSuperseded(a)),
      el("td", {},
        el("button", { type: "button", onclick: () => consult(a.id), "aria-label": `Consult on ${a.subject}` }, "Consult"),
        " ",
        el("button", { type: "button", class: "linklike", onclick: () => explain(a.id), "aria-label": `Explain ${a.subject}` }, "Explain")),
    ));
  }
  if (!view.assessments.length) rows.append(el("tr", {}, el("td", { colspan: 5, class: "muted" }, "No assessment on this page.")));
  const first = state.total ? state.offset + 1 : 0;
  const last = Math.min(state.offset + PAGE, state.total);
  $("page-label").textContent = `${first}–${last} of ${state.total}`;
  $("assessments-summary").textContent = `${view.records} records in task ${view.task || state.task || "(default)"}${journalNote(view.journal)}`;
  $("prev-page").disabled = state.offset === 0;
  $("next-page").disabled = state.offset + PAGE >= state.total;
}

function renderDisagreements(view) {
  const box = $("disagreements");
  const found = [];
  for (const a of view.assessments) {
    for (const d of a.disagreements || []) found.push({ a, d });
  }
  box.replaceChildren();
  if (!found.length) { box.append(el("p", { class: "muted" }, "None on this page.")); return; }
  for (const { a, d } of found) {
    box.append(el("article", { class: "disagreement", "data-disagreement": d.id },
      el("p", {}, badge(d.resolved ? "resolved" : "open", d.resolved ? "concluded" : "disputed"), " on ", el("strong", {}, a.subject)),
      el("p", { class: "question" }, "Discriminating question: ", d.discriminating_question),
      el("ul", {}, (d.positions || []).map((p) => el("li", {}, p))),
      el("button", { type: "button", class: "linklike", onclick: () => explain(d.id) }, "Explain")));
  }
}

// ---- jobs ----------------------------------------------------------------------------

async function loadJobs() {
  const params = new URLSearchParams({ root: state.root });
  if (state.task) params.set("task", state.task);
  const list = await api("GET", `/api/v1/consultations?${params}`);
  for (const job of list.jobs) mergeJob(job);
  renderJobs();
}

function mergeJob(job) {
  const known = state.jobs.get(job.id) || { rows: new Map() };
  known.job = job;
  for (const c of job.consultations || []) {
    const row = known.rows.get(c.advisor) || { advisor: c.advisor, step: "pending" };
    if (c.status === "completed") row.step = "recorded";
    else if (c.status === "failed") { row.step = "failed"; row.failure = c.failure; }
    else if (c.status === "running" && row.step === "pending") row.step = "asked";
    known.rows.set(c.advisor, row);
  }
  state.jobs.set(job.id, known);
  return known;
}

function onJobEvent(event) {
  const known = state.jobs.get(event.job);
  if (!known || event.event === "plan" || event.event === "done") {
    api("GET", `/api/v1/consultations/${encodeURIComponent(event.job)}`)
      .then((job) => { mergeJob(job); applyEvent(state.jobs.get(job.id), event); renderJobs(); })
      .catch(() => {});
    if (!known) return;
  }
  applyEvent(known, event);
  renderJobs();
}

function applyEvent(known, event) {
  if (!known || !event.advisor) return;
  const row = known.rows.get(event.advisor) || { advisor: event.advisor, step: "pending" };
  if (event.event === "started") { row.step = "asked"; row.started = Date.parse(event.at); }
  if (event.event === "finished") {
    row.step = event.status === "failed" ? "failed" : "answered";
    row.failure = event.failure; row.took = event.duration_ms;
  }
  if (event.event === "recorded") {
    const failed = event.record && event.record.status === "failed";
    row.step = failed ? "failed" : "recorded";
    if (failed) row.failure = event.record.failure;
  }
  known.rows.set(event.advisor, row);
}

function renderJobs() {
  // Re-rendered every second while a job runs.
  keepingFocus($("jobs"), drawJobs);
}

function drawJobs() {
  const box = $("jobs");
  const jobs = [...state.jobs.values()].sort((x, y) => (x.job.id < y.job.id ? 1 : -1)).slice(0, 10);
  box.replaceChildren();
  if (!jobs.length) { box.append(el("p", { class: "muted" }, "No consultation yet.")); return; }
  const now = Date.now();
  for (const { job, rows } of jobs) {
    const starts = [...rows.values()].map((r) => r.started).filter(Boolean);
    const begun = starts.length ? Math.min(...starts) : null;
    const deadline = begun && job.timeout_s ? begun + job.timeout_s * 1000 : null;
    const finished = ["done", "cancelled", "failed"].includes(job.state);
    const body = el("tbody", {});
    for (const row of rows.values()) {
      const elapsed = row.took !== undefined ? row.took : row.started ? now - row.started : null;
      body.append(el("tr", { "data-advisor": row.advisor, "data-step": row.step },
        el("th", { scope: "row" }, row.advisor),
        el("td", {}, badge(row.step), row.failure ? ` ${row.failure}` : ""),
        el("td", {}, elapsed === null ? "—" : seconds(elapsed)),
        el("td", {}, deadline ? (finished ? new Date(deadline).toLocaleTimeString() : `in ${seconds(deadline - now)}`) : "—")));
    }
    box.append(el("article", { class: "job", "data-job": job.id, "aria-label": `Consultation ${short(job.id)}` },
      el("header", {},
        el("h3", {}, "Job ", el("span", { class: "id" }, short(job.id))),
        badge(job.state),
        el("span", { class: "muted" }, "assessment ", el("span", { class: "id" }, short(job.assessment))),
        job.disagreement ? el("button", { type: "button", class: "linklike", onclick: () => explain(job.disagreement) }, "disagreement") : null,
        finished ? null : el("button", { type: "button", class: "danger", onclick: () => cancel(job.id), "aria-label": `Cancel job ${short(job.id)}` }, "Cancel")),
      el("div", { class: "scroll" }, el("table", {},
        el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Advisor"), el("th", { scope: "col" }, "Step"), el("th", { scope: "col" }, "Elapsed"), el("th", { scope: "col" }, "Deadline"))),
        body)),
      job.reason ? el("p", { class: "muted" }, job.reason) : null));
  }
}

async function consult(assessment) {
  try {
    const job = await api("POST", `/api/v1/consultations?${query()}`, { assessment });
    mergeJob(job);
    renderJobs();
    say(`consultation ${short(job.id)} queued`, true);
  } catch (e) { say(`could not start the consultation: ${e.message}`); }
}

async function cancel(id) {
  try {
    const job = await api("DELETE", `/api/v1/consultations/${encodeURIComponent(id)}`);
    mergeJob(job);
    renderJobs();
  } catch (e) { say(`could not cancel: ${e.message}`); }
}

// ---- advisors ------------------------------------------------------------------------

async function loadAdvisors() {
  renderAdvisors(await api("GET", `/api/v1/reasoning/advisors?${query()}`));
}

// A track record with its size ("favoured 3 of 4"), never a bare ratio; information only.
function trackText(t) {
  if (!t || !t.resolutions) return "—";
  const n = t.resolutions;
  const neither = n - t.favoured - t.disfavoured;
  return `favoured ${t.favoured} of ${n}, disfavoured ${t.disfavoured} of ${n}` +
    (neither > 0 ? `, ${neither} favoured neither` : "");
}

function trackCell(t) {
  const recent = ((t && t.recent) || []).map((r) => `${r.outcome} ${r.at}: ${r.subject}`);
  return el("td", { class: "track", title: recent.join("\n") || undefined }, trackText(t));
}

function renderAdvisors(view) {
  state.advisors = view.advisors || [];
  const rows = $("advisor-rows");
  rows.replaceChildren();
  for (const a of state.advisors) {
    rows.append(el("tr", { "data-advisor": a.id, "data-status": a.status },
      el("th", { scope: "row" }, a.id, el("div", { class: "muted hide-narrow" }, a.title)),
      el("td", {}, badge(a.status)),
      el("td", {}, a.reason),
      trackCell(a.track_record),
      el("td", { class: "countdown", "data-until": a.until || "" }, "—")));
  }
  // Advisors no longer in the catalogue keep their history.
  for (const f of view.former || []) {
    rows.append(el("tr", { "data-advisor": f.id, "data-status": "former" },
      el("th", { scope: "row" }, f.id),
      el("td", {}, badge("former")),
      el("td", {}, "no longer in the catalogue"),
      trackCell(f.track_record),
      el("td", {}, "—")));
  }
  tickCountdowns();
}

function tickCountdowns() {
  let expired = false;
  for (const cell of document.querySelectorAll("td.countdown")) {
    const until = cell.dataset.until ? Date.parse(cell.dataset.until) : NaN;
    if (Number.isNaN(until)) { cell.textContent = "—"; continue; }
    const left = until - Date.now();
    cell.textContent = left > 0 ? seconds(left) : "now";
    if (left <= 0 && left > -1500) expired = true;
  }
  if (expired) loadAdvisors().catch(() => {});
}

// ---- plan, explain, tree -------------------------------------------------------------

async function previewPlan(event) {
  event.preventDefault();
  const capabilities = $("plan-capabilities").value.split(",").map((s) => s.trim()).filter(Boolean);
  const body = { materiality: $("plan-materiality").value, confidence: $("plan-confidence").value, capabilities };
  const box = $("plan");
  try {
    const plan = await api("POST", `/api/v1/reasoning/plan?${query()}`, body);
    box.replaceChildren(
      el("p", {}, `Mode ${plan.mode}, budget ${plan.budget}`),
      el("h3", {}, "Selected"),
      el("ul", {}, (plan.selected || []).map((s) => el("li", {}, el("strong", {}, s.advisor), ` — ${s.why}`))),
      el("h3", {}, "Left out"),
      el("ul", {}, (plan.left_out || []).map((s) => el("li", {}, el("strong", {}, s.advisor), ` — ${s.reason}`))));
  } catch (e) { box.replaceChildren(el("p", { role: "alert" }, e.message)); }
}

function text(value) {
  if (value && typeof value === "object") return value.position ? `${value.source}: ${value.position}` : JSON.stringify(value);
  return String(value);
}

function fields(item, names) {
  return el("dl", {}, names.filter((n) => item[n] !== undefined && item[n] !== null && item[n] !== "")
    .map((n) => [el("dt", {}, n), el("dd", {}, Array.isArray(item[n]) ? item[n].map(text).join("; ") : text(item[n]))]));
}

async function explain(id) {
  const box = $("explain");
  try {
    const view = await api("GET", `/api/v1/reasoning/explain?${query({ id })}`);
    const parts = [el("p", {}, "Path: ", (view.path || []).map((l, i) => [i ? " → " : "", el("span", { class: "id", title: l.id }, `${l.kind || "record"} ${short(l.id)}`)]))];
    if (view.assessment) parts.push(el("h3", {}, "Assessment"), fields(view.assessment, ["subject", "materiality", "hypothesis", "confidence"]));
    for (const p of view.plans || []) {
      parts.push(el("h3", {}, `Plan ${short(p.id)}`));
      parts.push(el("ul", {}, (p.consultations || []).map((c) => el("li", {}, el("strong", {}, c.advisor), " ", badge(c.status === "failed" ? "failed" : c.stance || c.status, c.status === "failed" ? "failed" : "recorded"), c.conclusion ? ` ${c.conclusion}` : c.failure ? ` ${c.failure}` : ""))));
    }
    for (const d of view.disagreements || []) {
      parts.push(el("h3", {}, "Disagreement"), fields(d, ["discriminating_question", "positions"]));
      for (const r of d.resolutions || []) parts.push(fields(r, ["favours", "observed"]));
    }
    for (const c of view.conclusions || []) parts.push(el("h3", {}, "Conclusion"), fields(c, ["decision", "reviewed_by", "independent_review_count"]));
    box.replaceChildren(...parts);
    $("explain-panel").scrollIntoView({ block: "nearest" });
  } catch (e) { box.replaceChildren(el("p", { role: "alert" }, e.message)); }
}

function treeNode(node) {
  return el("li", {},
    el("span", { class: "kind" }, node.kind),
    el("button", { type: "button", class: "linklike", onclick: () => explain(node.id) }, node.label),
    node.hidden_children ? el("span", { class: "muted" }, ` (+${node.hidden_children})`) : null,
    node.children && node.children.length ? el("ul", {}, node.children.map(treeNode)) : null);
}

async function loadTree() {
  const view = await api("GET", `/api/v1/reasoning/tree?${query({ depth: 4, offset: state.treeOffset, limit: TREE_PAGE })}`);
  const total = view.page ? view.page.total : view.nodes.length;
  $("tree").replaceChildren(el("div", { class: "tree" }, el("ul", {}, view.nodes.map(treeNode))));
  $("tree-label").textContent = `${total ? state.treeOffset + 1 : 0}–${Math.min(state.treeOffset + TREE_PAGE, total)} of ${total}`;
  $("tree-prev").disabled = state.treeOffset === 0;
  $("tree-next").disabled = state.treeOffset + TREE_PAGE >= total;
}

// ---- live ----------------------------------------------------------------------------

let source = null;
let refresh = null;

function soon() {
  clearTimeout(refresh);
  // A record may be a task's first: the Tasks panel follows the feed as the list does.
  refresh = setTimeout(() => {
    loadStatus().catch(() => {});
    loadTree().catch(() => {});
    loadTasks().catch(() => {});
  }, 250);
}

function follow() {
  if (source) source.close();
  source = new EventSource(`/api/v1/events?${query()}`);
  source.onopen = () => say("live", true);
  source.onerror = () => say("reconnecting…");
  source.addEventListener("job", (m) => onJobEvent(JSON.parse(m.data)));
  source.addEventListener("record", (m) => {
    soon();
    // A resolution changes track records, which the advisors panel shows.
    try { if (JSON.parse(m.data).kind === "resolution") loadAdvisors().catch(() => {}); } catch (_) { /* not JSON */ }
  });
  source.addEventListener("advisors", (m) => renderAdvisors(JSON.parse(m.data)));
  source.addEventListener("reset", () => { loadAll(); });
  source.addEventListener("dropped", () => { say("fell behind; catching up…"); loadAll(); });
}

function loadAll() {
  const fail = (what) => (e) => say(`${what}: ${e.message}`);
  // The list first, alone: on a large task every view reads the task afresh, and the
  // others would share the daemon's cores with it.
  loadStatus().catch(fail("status")).finally(() => {
    loadTasks().catch(fail("tasks"));
    loadJobs().catch(fail("jobs"));
    loadAdvisors().catch(fail("advisors"));
    loadTree().catch(fail("tree"));
  });
}

function show(event) {
  if (event) event.preventDefault();
  state.root = $("root").value.trim();
  state.task = $("task").value.trim();
  state.offset = 0;
  state.treeOffset = 0;
  state.jobs.clear();
  state.shown = { task: "", records: 0 };
  state.taskNames = [];
  state.tasksKnown = false;
  const params = new URLSearchParams(query());
  history.replaceState(null, "", `/cockpit?${params}`);
  if (!state.root) { say("name a root (an absolute directory) to begin"); return; }
  loadAll();
  follow();
}

document.addEventListener("DOMContentLoaded", () => {
  const params = new URLSearchParams(location.search);
  $("root").value = params.get("root") || "";
  $("task").value = params.get("task") || "";
  state.catalogue = params.get("catalogue") || "";
  state.stateDir = params.get("state_dir") || "";
  $("where").addEventListener("submit", show);
  $("plan-form").addEventListener("submit", previewPlan);
  $("prev-page").addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE); loadStatus(); });
  $("next-page").addEventListener("click", () => { state.offset += PAGE; loadStatus(); });
  $("tree-prev").addEventListener("click", () => { state.treeOffset = Math.max(0, state.treeOffset - TREE_PAGE); loadTree(); });
  $("tree-next").addEventListener("click", () => { state.treeOffset += TREE_PAGE; loadTree(); });
  setInterval(() => { tickCountdowns(); if ([...state.jobs.values()].some((j) => !["done", "cancelled", "failed"].includes(j.job.state))) renderJobs(); }, 1000);
  show();
});
