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
const BACKOFF_MS = [500, 1000, 2000, 4000, 8000];  // reconnect delays after a dropped connection (then 8 s)
let ws = null, pid = "", episode = null, driving = false, allowBack = true, pauseS = 3, withdrawData = "keep";
// the session secret the server issued on consent, kept in this browser's storage so that a reload or a
// dropped connection resumes; another device needs a resume code from the experimenter
let secret = "", resumeCode = "", online = false, finished = false, retries = 0, retryTimer = null;
let loadingTimer = null, loadingSince = 0;
const secretKey = (id) => `vlnverse-secret:${id}`;
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
function send(obj) {  // every message after consent carries the session secret
  if (ws && ws.readyState === WebSocket.OPEN && online) ws.send(JSON.stringify(secret ? { ...obj, secret } : obj));
}
function setOnline(value) {  // controls that talk to the server work only while connected
  online = value;
  for (const b of document.querySelectorAll("button.needs-connection")) b.disabled = !value || b.dataset.wait === "1";
  $("offline").classList.toggle("hidden", value || finished || !pid);
  if (!value) { driving = false; held.clear(); lastSent = ""; loading(false); }
}
function loading(on) {  // the spinner over the view while the scene loads (until its first frame)
  clearInterval(loadingTimer);
  $("loading").classList.toggle("hidden", !on);
  if (on) { loadingSince = performance.now(); $("loading-s").textContent = "0";
    loadingTimer = setInterval(() => { $("loading-s").textContent = Math.round((performance.now() - loadingSince) / 1000); }, 500); }
}
function finish() { finished = true; clearTimeout(retryTimer); if (ws) ws.onclose = null; setOnline(false); }
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
  for (const b of [$("modal-go"), $("modal-end")]) { b.disabled = true; b.dataset.wait = "1"; }
  setTimeout(() => { for (const b of [$("modal-go"), $("modal-end")]) { b.dataset.wait = ""; b.disabled = !online; } }, READ_DELAY_MS);
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
  clearTimeout(retryTimer);
  ws = new WebSocket(`${proto}://${location.host}/ws`);
  ws.binaryType = "arraybuffer";
  let refused = false;
  ws.onopen = () => {
    const hello = { type: "hello", pid };
    if (secret) hello.secret = secret; else if (resumeCode) hello.resume_code = resumeCode;
    ws.send(JSON.stringify(hello));
    $("status").textContent = "connected";
  };
  ws.onmessage = (ev) => {
    if (typeof ev.data !== "string") {  // one byte of contact state, then the JPEG
      const bytes = new Uint8Array(ev.data);
      if (bytes[0] === 1) collisionCue();
      if (frameUrl) URL.revokeObjectURL(frameUrl);
      frameUrl = URL.createObjectURL(new Blob([bytes.subarray(1)], { type: "image/jpeg" }));
      $("view").src = frameUrl;
      loading(false);
      const now = performance.now(); frames.push(now);
      while (frames.length && frames[0] < now - 1000) frames.shift();
      return;
    }
    const msg = JSON.parse(ev.data);
    if (msg.type === "refused") {
      refused = true; finish(); resumeCode = "";
      message("Cannot continue", msg.message);
    }
    else if (msg.type === "welcome") {
      retries = 0; resumeCode = "";
      if (msg.secret) { secret = msg.secret; localStorage.setItem(secretKey(pid), secret); }
      setOnline(true);
      $("title").textContent = msg.title; $("who").textContent = msg.participant; allowBack = msg.allow_backward;
      pauseS = msg.pause_s; withdrawData = msg.withdraw_data;
      $("back-row").classList.toggle("hidden", !allowBack);
      if (msg.consented) send({ type: "next" }); else { $("consent-text").textContent = msg.consent; show("consent"); $("agree").focus(); }
    }
    else if (msg.type === "session") { secret = msg.secret; localStorage.setItem(secretKey(pid), secret); }
    else if (msg.type === "episode") onEpisode(msg);
    else if (msg.type === "episode_end") onEpisodeEnd(msg);
    else if (msg.type === "complete") { clearTimeout(pauseTimer); finish(); ws.close(); message("Thank you!", `You finished all ${msg.total} episodes. You may close this tab.`); }
    else if (msg.type === "ready") { $("status").textContent = driving ? "driving" : "ready"; }
    else if (msg.type === "withdrawn") {
      localStorage.removeItem(secretKey(pid)); secret = ""; finish();
      message("You have withdrawn", "Thank you for your time. " + (msg.deleted ? "The data recorded so far has been deleted." : "The data recorded so far is kept, as the consent text said.") + " You may close this tab.");
    }
    else if (msg.type === "error") { stopDriving(); message("Please call the experimenter", "The study could not continue: " + msg.message); }
  };
  ws.onclose = (ev) => {
    if (refused || finished) {
      if (ev.code === 4401) { localStorage.removeItem(secretKey(pid)); secret = ""; }  // a secret the server no longer knows
      return;
    }
    setOnline(false);
    $("status").textContent = "disconnected";
    const delay = BACKOFF_MS[Math.min(retries, BACKOFF_MS.length - 1)];
    retries += 1;
    $("offline-status").textContent = `Reconnecting (attempt ${retries}, in ${Math.round(delay / 100) / 10} s)…`;
    retryTimer = setTimeout(connect, delay);
  };
}

$("login-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const value = $("pid").value.trim();
  if (!/^[A-Za-z0-9_-]{1,40}$/.test(value)) { $("login-error").textContent = "Use 1-40 letters, digits, '_' or '-'."; return; }
  pid = value; sessionStorage.setItem("vlnverse-pid", pid);
  secret = localStorage.getItem(secretKey(pid)) || "";
  resumeCode = $("resume-code").value.trim();
  if (resumeCode) secret = "";  // a resume code replaces whatever this browser kept
  finished = false; retries = 0; connect();
});
$("show-code").addEventListener("click", (ev) => { ev.preventDefault(); $("code-row").classList.remove("hidden"); $("resume-code").focus(); });
$("agree").addEventListener("click", () => send({ type: "consent" }));
$("modal-go").addEventListener("click", () => {
  closeModal(); driving = true; send({ type: "start" }); $("status").textContent = "loading the scene…";
  if (!$("view").getAttribute("src")) loading(true);  // the first frame of a session: show progress until it comes
});
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
  if (!online) return;
  stopDriving();
  $("withdraw-text").textContent = "Your session ends now and this participant id cannot be used again. " +
    (withdrawData === "delete" ? "The data recorded so far will be deleted." : "The data recorded so far is kept, as the consent text said.");
  $("withdraw-yes").textContent = withdrawData === "delete" ? "Withdraw and delete my data" : "Withdraw";
  $("withdraw-modal").classList.remove("hidden");
  $("withdraw-no").focus();
}
$("withdraw").addEventListener("click", askWithdraw);
$("pause-withdraw").addEventListener("click", askWithdraw);
$("withdraw-yes").addEventListener("click", () => { $("withdraw-modal").classList.add("hidden"); clearTimeout(pauseTimer); send({ type: "withdraw", confirm: true }); });
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
