// vlnverse human study page: participant id -> consent -> (practice) -> instruction pop-up -> keyboard
// driving -> Enter asks "Are you at the goal?" -> pause screen -> next instruction pop-up.
"use strict";
const $ = (id) => document.getElementById(id);
const KEYMAP = {
  KeyW: "forward", ArrowUp: "forward", KeyS: "back", ArrowDown: "back",
  KeyA: "left", ArrowLeft: "left", KeyD: "right", ArrowRight: "right",
  KeyQ: "look_up", KeyE: "look_down",
};
const DEBUG = new URLSearchParams(location.search).has("debug");  // frame-rate counter for the experimenter
const READ_DELAY_MS = 1000;  // the instruction pop-up's button accepts a click only after this long
const MODALS = ["instruction-modal", "confirm-modal", "withdraw-modal"];
let ws = null, pid = "", episode = null, driving = false, allowBack = true, pauseS = 3, withdrawData = "keep";
const held = new Set();
let lastSent = "", frameUrl = null, frames = [], pauseUntil = 0, pauseTimer = null;
let hits = 0, flashTimer = null;
window.vlnverseStudy = { hits: () => hits };  // for tests: collision cues shown so far

function show(id) {
  for (const s of ["login", "consent", "message", "drive", "pause"]) $(s).classList.toggle("hidden", s !== id);
}
function message(title, text) {
  for (const m of MODALS) $(m).classList.add("hidden");
  $("message-title").textContent = title; $("message-text").textContent = text; show("message");
}
function modalOpen() { return MODALS.some((m) => !$(m).classList.contains("hidden")); }
function send(obj) { if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(obj)); }
function sendKeys() {
  const keys = driving ? [...held].sort() : [];
  const text = keys.join(",");
  if (text !== lastSent) { lastSent = text; send({ type: "keys", keys }); }
}
function stopDriving() { driving = false; held.clear(); sendKeys(); }

function openModal() {
  $("modal-title").textContent = episode.practice ? "Practice episode: your instruction" : "Your instruction";
  $("modal-instruction").textContent = episode.instruction;
  $("modal-resume").classList.toggle("hidden", !episode.resumed);
  $("modal-end").classList.toggle("hidden", !episode.resumed);
  $("modal-go").textContent = episode.resumed ? "Resume" : "Start driving";
  $("instruction-modal").classList.remove("hidden");
  stopDriving();
  // an explicit click only: Enter never presses it (see the keydown guard), and not at once
  $("modal-go").disabled = true; $("modal-end").disabled = true;
  setTimeout(() => { $("modal-go").disabled = false; $("modal-end").disabled = false; }, READ_DELAY_MS);
  if (document.activeElement) document.activeElement.blur();
}
function closeModal() { $("instruction-modal").classList.add("hidden"); }

function onEpisode(msg) {
  const wait = pauseUntil - performance.now();
  if (wait > 0) { clearTimeout(pauseTimer); pauseTimer = setTimeout(() => onEpisode(msg), wait); return; }
  episode = msg;
  $("ep-head").innerHTML = msg.practice ? `<span class="practice">Practice episode</span> (not scored)` :
    `Episode <span id="ep-index"></span> of <span id="ep-total"></span>`;
  if (!msg.practice) { $("ep-index").textContent = msg.index; $("ep-total").textContent = msg.total; }
  $("ep-instruction").textContent = msg.instruction;
  show("drive"); openModal();
}

function onEpisodeEnd(msg) {
  stopDriving();
  $("confirm-modal").classList.add("hidden");
  const practice = episode && episode.practice;
  $("pause-title").textContent = practice ? "Practice finished" : "Episode finished";
  $("pause-text").textContent = (msg.termination === "failure" ? "The episode ended after a collision. " : "") +
    (practice ? "The scored episodes start next. " : "") + "Take a short break; the next instruction appears in a moment.";
  pauseUntil = performance.now() + 1000 * pauseS;
  show("pause");
}

function collisionCue() {
  hits += 1;
  $("collision-flash").classList.add("on");
  clearTimeout(flashTimer);
  flashTimer = setTimeout(() => $("collision-flash").classList.remove("on"), 250);
}

function connect() {
  const proto = location.protocol === "https:" ? "wss" : "ws";
  ws = new WebSocket(`${proto}://${location.host}/ws?pid=${encodeURIComponent(pid)}`);
  ws.binaryType = "arraybuffer";
  ws.onmessage = (ev) => {
    if (typeof ev.data !== "string") {  // one byte of contact state, then the JPEG
      const bytes = new Uint8Array(ev.data);
      if (bytes[0] === 1) collisionCue();
      if (frameUrl) URL.revokeObjectURL(frameUrl);
      frameUrl = URL.createObjectURL(new Blob([bytes.subarray(1)], { type: "image/jpeg" }));
      $("view").src = frameUrl;
      const now = performance.now(); frames.push(now);
      while (frames.length && frames[0] < now - 1000) frames.shift();
      return;
    }
    const msg = JSON.parse(ev.data);
    if (msg.type === "refused") { ws.onclose = null; message("Cannot continue", msg.message); }
    else if (msg.type === "welcome") {
      $("title").textContent = msg.title; $("who").textContent = msg.participant; allowBack = msg.allow_backward;
      pauseS = msg.pause_s; withdrawData = msg.withdraw_data;
      $("back-row").classList.toggle("hidden", !allowBack);
      if (msg.consented) send({ type: "next" }); else { $("consent-text").textContent = msg.consent; show("consent"); $("agree").focus(); }
    }
    else if (msg.type === "episode") onEpisode(msg);
    else if (msg.type === "episode_end") onEpisodeEnd(msg);
    else if (msg.type === "complete") { clearTimeout(pauseTimer); message("Thank you!", `You finished all ${msg.total} episodes. You may close this tab.`); }
    else if (msg.type === "ready") $("status").textContent = driving ? "driving" : "ready";
    else if (msg.type === "withdrawn") { ws.onclose = null; message("You have withdrawn", "Thank you for your time. " + (msg.deleted ? "The data recorded so far has been deleted." : "The data recorded so far is kept, as the consent text said.") + " You may close this tab."); }
    else if (msg.type === "error") { stopDriving(); message("Please call the experimenter", "The study could not continue: " + msg.message); }
  };
  ws.onopen = () => { $("status").textContent = "connected"; };
  ws.onclose = () => { driving = false; $("status").textContent = "disconnected — reload the page to resume"; };
}

$("login-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const value = $("pid").value.trim();
  if (!/^[A-Za-z0-9_-]{1,40}$/.test(value)) { $("login-error").textContent = "Use 1-40 letters, digits, '_' or '-'."; return; }
  pid = value; sessionStorage.setItem("vlnverse-pid", pid); connect();
});
$("agree").addEventListener("click", () => send({ type: "consent" }));
$("modal-go").addEventListener("click", () => { closeModal(); driving = true; send({ type: "start" }); $("status").textContent = "loading the scene…"; });
$("modal-end").addEventListener("click", () => { closeModal(); send({ type: "end" }); });
$("show-instruction").addEventListener("click", (ev) => {
  ev.preventDefault(); if (!episode) return;
  $("modal-instruction").textContent = episode.instruction;
  $("modal-resume").classList.add("hidden"); $("modal-end").classList.add("hidden");
  $("modal-go").textContent = "Continue"; $("instruction-modal").classList.remove("hidden");
  stopDriving();
});
$("confirm-yes").addEventListener("click", () => { $("confirm-modal").classList.add("hidden"); send({ type: "finish" }); $("status").textContent = "finishing…"; });
$("confirm-no").addEventListener("click", () => { $("confirm-modal").classList.add("hidden"); driving = true; $("status").textContent = "driving"; });
function askWithdraw() {
  stopDriving();
  $("withdraw-text").textContent = "Your session ends now and this participant id cannot be used again. " +
    (withdrawData === "delete" ? "The data recorded so far will be deleted." : "The data recorded so far is kept, as the consent text said.");
  $("withdraw-modal").classList.remove("hidden");
}
$("withdraw").addEventListener("click", askWithdraw);
$("pause-withdraw").addEventListener("click", askWithdraw);
$("withdraw-yes").addEventListener("click", () => { $("withdraw-modal").classList.add("hidden"); clearTimeout(pauseTimer); send({ type: "withdraw" }); });
$("withdraw-no").addEventListener("click", () => {
  $("withdraw-modal").classList.add("hidden");
  if (!$("drive").classList.contains("hidden") && !modalOpen() && episode) driving = true;
});

// While a pop-up is open, Enter and Space never press its buttons: each needs its own click.
document.addEventListener("keydown", (ev) => {
  if (modalOpen() && (ev.code === "Enter" || ev.code === "NumpadEnter" || ev.code === "Space")) { ev.preventDefault(); ev.stopPropagation(); }
}, true);
document.addEventListener("keydown", (ev) => {
  if (modalOpen() || $("drive").classList.contains("hidden")) return;
  if ((ev.code === "Enter" || ev.code === "NumpadEnter") && driving) {
    ev.preventDefault(); if (ev.repeat) return;
    stopDriving(); $("confirm-modal").classList.remove("hidden");
    if (document.activeElement) document.activeElement.blur();
    return;
  }
  const key = KEYMAP[ev.code];
  if (!key || !driving) return;
  ev.preventDefault();
  if (key === "back" && !allowBack) return;
  held.add(key); sendKeys();  // auto-repeat keydowns leave the set unchanged: nothing is queued
});
document.addEventListener("keyup", (ev) => { const key = KEYMAP[ev.code]; if (key) { held.delete(key); sendKeys(); } });
window.addEventListener("blur", () => { held.clear(); sendKeys(); });
if (DEBUG) { $("fps-wrap").classList.remove("hidden"); setInterval(() => { $("fps").textContent = frames.length; }, 500); }

const saved = sessionStorage.getItem("vlnverse-pid");
if (saved) $("pid").value = saved;
