// vlnverse episode visualizer: pick run / task / split / episode, step through, compare two runs.
"use strict";
const $ = (id) => document.getElementById(id);
const PERCENT = new Set(["SR", "OSR", "SPL", "nDTW", "sDTW", "CLS", "CR", "RSR", "reach_SR", "decision_SR", "RD_SR", "coverage", "REV_SPL", "Rid_SR", "Oid_SR"]);
let runs = [], current = null, other = null, step = 0;

async function getJSON(url) {
  const r = await fetch(url);
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
function options(select, values, labels) {
  select.innerHTML = "";
  values.forEach((v, i) => { const o = document.createElement("option"); o.value = v; o.textContent = labels ? labels[i] : v; select.appendChild(o); });
}
function fmt(name, v) { if (v === null || v === undefined) return "-"; if (typeof v !== "number") return String(v); return PERCENT.has(name) ? (100 * v).toFixed(1) + " %" : v.toFixed(2); }
function actionText(a) { if (a === null || a === undefined) return "start"; return typeof a === "string" ? a : JSON.stringify(a); }

function fillPickers() {
  const run = runs[+$("run").value];
  const tasks = [...new Set(run.episodes.map((e) => e.task_type))].sort();
  if (![...$("task").options].some((o) => o.value === $("task").value) || $("task").dataset.run !== String(run.index)) { options($("task"), tasks); $("task").dataset.run = run.index; }
  const inTask = run.episodes.filter((e) => e.task_type === $("task").value);
  const splits = [...new Set(inTask.map((e) => e.split))].sort();
  const keepSplit = $("split").value;
  options($("split"), splits); if (splits.includes(keepSplit)) $("split").value = keepSplit;
  const eps = inTask.filter((e) => e.split === $("split").value);
  options($("episode"), eps.map((e) => e.key), eps.map((e) => `${e.key} (${e.termination}${e.SR === null || e.SR === undefined ? "" : ", SR " + e.SR})`));
}

async function loadEpisode() {
  $("error").textContent = "";
  const runIndex = +$("run").value, key = $("episode").value;
  if (!key) { $("panels").innerHTML = ""; return; }
  try {
    current = { run: runIndex, key, data: await getJSON(`/api/runs/${runIndex}/episode?key=${encodeURIComponent(key)}`) };
    other = null;
    const cmp = $("compare").value;
    if (cmp !== "") {
      const run = runs[+cmp];
      const match = run.episodes.find((e) => e.episode_id === current.data.episode_id);
      if (match) other = { run: +cmp, key: match.key, data: await getJSON(`/api/runs/${cmp}/episode?key=${encodeURIComponent(match.key)}`) };
      else $("error").textContent = `run ${run.name} has no episode ${current.data.episode_id} to compare`;
    }
    history.replaceState(null, "", `/run/${runIndex}/${key}`);
    const last = current.data.steps.length - 1;  // the slider steps the chosen run; the other is aligned to it
    $("step").max = last; step = Math.min(step, last); $("step").value = step;
    $("panels").innerHTML = "";
    for (const p of [current, other]) if (p) { p.el = $("panel-template").content.firstElementChild.cloneNode(true); $("panels").appendChild(p.el); staticPanel(p); }
    render();
  } catch (err) { $("error").textContent = err.message; }
}

function staticPanel(p) {
  const d = p.data, run = runs[p.run];
  p.el.querySelector(".p-title").textContent = `${run.name} · ${run.agent || run.kind} · ${d.episode_id}` + (d.participant ? ` · participant ${d.participant}` : "") + ` · ${d.termination}`;
  p.el.querySelector(".p-instruction").textContent = d.instruction || "";
  // one column list, in one order, for every panel: the chosen run's (agents and humans alike)
  const names = current.data.metric_columns;
  p.el.querySelector(".p-metrics").innerHTML = "<tr>" + names.map((k) => `<th>${k}</th>`).join("") + "</tr><tr>" + names.map((k) => `<td>${fmt(k, d.metrics[k])}</td>`).join("") + "</tr>";
  if (d.agent_outputs && (!Array.isArray(d.agent_outputs) || d.agent_outputs.length)) outputBlock(p.el.querySelector(".p-output"), d.agent_outputs, p.run, "agent outputs");
}

function outputBlock(el, output, runIndex, title) {
  el.innerHTML = `<h3>${title}</h3>`;
  const items = typeof output === "object" && output !== null && !Array.isArray(output) ? Object.entries(output) : [["output", output]];
  for (const [k, v] of items) {
    const isImage = (s) => typeof s === "string" && (/^data:image\//.test(s) || /\.(png|jpe?g|webp)$/i.test(s));
    const imgs = Array.isArray(v) ? v.filter(isImage) : isImage(v) ? [v] : [];
    const h = document.createElement("h4"); h.textContent = k; el.appendChild(h);
    if (imgs.length) for (const src of imgs) { const img = document.createElement("img"); img.src = src.startsWith("data:") ? src : `/runs/${runIndex}/files/${src}`; el.appendChild(img); }
    else { const pre = document.createElement("pre"); pre.textContent = typeof v === "string" ? v : JSON.stringify(v, null, 2); el.appendChild(pre); }
  }
}

// The other run's step shown beside the chosen run's step `i`: by distance travelled (default), by
// progress along the reference path, or by index. An agent's 0.25 m steps and a human's 50 ms ticks
// then show the same stretch of the way, not the same count of records.
function alignedStep(from, to, i) {
  const mode = $("align").value, s = from.steps[i];
  if (mode === "index" || s[mode] === null || s[mode] === undefined) return Math.min(i, to.steps.length - 1);
  let best = 0, bestErr = Infinity;
  to.steps.forEach((t, j) => {
    const err = Math.abs(t[mode] - s[mode]) + (mode === "progress" ? 1e-3 * Math.abs(t.travelled - s.travelled) : 0);
    if (err < bestErr - 1e-9) { best = j; bestErr = err; }
  });
  return best;
}

function render() {
  $("step").value = step;
  $("step-label").textContent = `step ${step} / ${$("step").max}`;
  for (const p of [current, other]) {
    if (!p) continue;
    const d = p.data, i = p === current ? step : alignedStep(current.data, d, step), s = d.steps[i];
    p.el.dataset.step = i;
    const q = `key=${encodeURIComponent(p.key)}&step=${i}`;
    p.el.querySelector(".p-view").src = s.frame || `/api/runs/${p.run}/view.jpg?${q}`;
    p.el.querySelector(".p-map").src = `/api/runs/${p.run}/map.png?${q}`;
    const pose = s.pose.map((v) => v.toFixed(2)).join(", ");
    p.el.querySelector(".p-action").innerHTML = `step ${i} · action: <b>${actionText(s.action)}</b> · pose (x, y, yaw, pitch) = (${pose})` + (s.t !== undefined && s.t !== null ? ` · t = ${s.t.toFixed(2)} s` : "") + ` · travelled ${s.travelled.toFixed(2)} m` + (s.collided ? ` · <span class="collided">collision</span>` : "");
    const off = d.left_reference_step;
    p.el.querySelector(".p-off").innerHTML = off === null ? `stayed within ${d.off_path_m} m of the reference path` :
      `<span class="${i >= off ? "off" : ""}">left the reference path (> ${d.off_path_m} m) at step ${off}</span>` + (i === off ? " ← this step" : "");
    const outEl = p.el.querySelector(".p-output");
    if ("output" in s) outputBlock(outEl, s.output, p.run, `agent output at step ${i}`);
  }
}

function go(n) { step = Math.max(0, Math.min(+$("step").max, n)); render(); }
$("prev").onclick = () => go(step - 1);
$("next").onclick = () => go(step + 1);
$("step").oninput = () => go(+$("step").value);
$("jump-off").onclick = () => {  // the earliest step where a shown episode left its reference path
  const offs = [];
  if (current && current.data.left_reference_step !== null) offs.push(current.data.left_reference_step);
  if (other && other.data.left_reference_step !== null) offs.push(alignedStep(other.data, current.data, other.data.left_reference_step));
  if (offs.length) go(Math.min(...offs));
};
document.addEventListener("keydown", (ev) => {
  if (ev.target.tagName === "SELECT") return;
  if (ev.key === "ArrowLeft") go(step - 1); else if (ev.key === "ArrowRight") go(step + 1);
});
// "compare with" lists the other runs only: a run cannot be compared with itself
function fillCompare() {
  const keep = $("compare").value, runIndex = $("run").value;
  $("compare").innerHTML = '<option value="">—</option>';
  for (const r of runs) if (String(r.index) !== runIndex) { const o = document.createElement("option"); o.value = r.index; o.textContent = r.name; $("compare").appendChild(o); }
  $("compare").value = keep !== runIndex && [...$("compare").options].some((o) => o.value === keep) ? keep : "";
}
$("run").onchange = () => { fillCompare(); fillPickers(); step = 0; loadEpisode(); };
$("align").onchange = () => render();
$("task").onchange = () => { fillPickers(); step = 0; loadEpisode(); };
$("split").onchange = () => { fillPickers(); step = 0; loadEpisode(); };
$("episode").onchange = () => { step = 0; loadEpisode(); };
$("compare").onchange = () => loadEpisode();

(async () => {
  try {
    runs = await getJSON("/api/runs");
    options($("run"), runs.map((r) => r.index), runs.map((r) => `${r.name} (${r.agent || r.kind}, ${r.episodes.length} eps)`));
    const m = location.pathname.match(/^\/run\/(\d+)\/(.+)$/);
    if (m && runs[+m[1]]) $("run").value = m[1];
    fillCompare();
    if (m && runs[+m[1]]) {
      const ep = runs[+m[1]].episodes.find((e) => e.key === decodeURIComponent(m[2]));
      if (ep) { fillPickers(); $("task").value = ep.task_type; fillPickers(); $("split").value = ep.split; fillPickers(); $("episode").value = ep.key; }
    } else fillPickers();
    await loadEpisode();
  } catch (err) { $("error").textContent = err.message; }
})();
