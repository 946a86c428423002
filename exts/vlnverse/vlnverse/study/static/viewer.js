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
    const longest = Math.max(current.data.steps.length, other ? other.data.steps.length : 0);
    $("step").max = longest - 1; step = Math.min(step, longest - 1); $("step").value = step;
    $("panels").innerHTML = "";
    for (const p of [current, other]) if (p) { p.el = $("panel-template").content.firstElementChild.cloneNode(true); $("panels").appendChild(p.el); staticPanel(p); }
    render();
  } catch (err) { $("error").textContent = err.message; }
}

function staticPanel(p) {
  const d = p.data, run = runs[p.run];
  p.el.querySelector(".p-title").textContent = `${run.name} · ${run.agent || run.kind} · ${d.episode_id}` + (d.participant ? ` · participant ${d.participant}` : "") + ` · ${d.termination}`;
  p.el.querySelector(".p-instruction").textContent = d.instruction || "";
  const rows = Object.entries(d.metrics).filter(([k, v]) => typeof v === "number" || v === null);
  p.el.querySelector(".p-metrics").innerHTML = "<tr>" + rows.map(([k]) => `<th>${k}</th>`).join("") + "</tr><tr>" + rows.map(([k, v]) => `<td>${fmt(k, v)}</td>`).join("") + "</tr>";
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

function render() {
  $("step").value = step;
  $("step-label").textContent = `step ${step} / ${$("step").max}`;
  for (const p of [current, other]) {
    if (!p) continue;
    const d = p.data, i = Math.min(step, d.steps.length - 1), s = d.steps[i];
    const q = `key=${encodeURIComponent(p.key)}&step=${i}`;
    p.el.querySelector(".p-view").src = s.frame || `/api/runs/${p.run}/view.jpg?${q}`;
    p.el.querySelector(".p-map").src = `/api/runs/${p.run}/map.png?${q}`;
    const pose = s.pose.map((v) => v.toFixed(2)).join(", ");
    p.el.querySelector(".p-action").innerHTML = `action: <b>${actionText(s.action)}</b> · pose (x, y, yaw, pitch) = (${pose})` + (s.t !== undefined && s.t !== null ? ` · t = ${s.t.toFixed(2)} s` : "") + (s.collided ? ` · <span class="collided">collision</span>` : "");
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
  const offs = [current, other].filter((p) => p && p.data.left_reference_step !== null).map((p) => p.data.left_reference_step);
  if (offs.length) go(Math.min(...offs));
};
document.addEventListener("keydown", (ev) => {
  if (ev.target.tagName === "SELECT") return;
  if (ev.key === "ArrowLeft") go(step - 1); else if (ev.key === "ArrowRight") go(step + 1);
});
$("run").onchange = () => { fillPickers(); step = 0; loadEpisode(); };
$("task").onchange = () => { fillPickers(); step = 0; loadEpisode(); };
$("split").onchange = () => { fillPickers(); step = 0; loadEpisode(); };
$("episode").onchange = () => { step = 0; loadEpisode(); };
$("compare").onchange = () => loadEpisode();

(async () => {
  try {
    runs = await getJSON("/api/runs");
    options($("run"), runs.map((r) => r.index), runs.map((r) => `${r.name} (${r.agent || r.kind}, ${r.episodes.length} eps)`));
    for (const r of runs) { const o = document.createElement("option"); o.value = r.index; o.textContent = r.name; $("compare").appendChild(o); }
    const m = location.pathname.match(/^\/run\/(\d+)\/(.+)$/);
    if (m && runs[+m[1]]) {
      $("run").value = m[1];
      const ep = runs[+m[1]].episodes.find((e) => e.key === decodeURIComponent(m[2]));
      if (ep) { fillPickers(); $("task").value = ep.task_type; fillPickers(); $("split").value = ep.split; fillPickers(); $("episode").value = ep.key; }
    } else fillPickers();
    await loadEpisode();
  } catch (err) { $("error").textContent = err.message; }
})();
