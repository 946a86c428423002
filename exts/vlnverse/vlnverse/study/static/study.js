// vlnverse human study page: participant id -> consent -> instruction pop-up -> keyboard driving.
"use strict";
const $ = (id) => document.getElementById(id);
const KEYMAP = {
  KeyW: "forward", ArrowUp: "forward", KeyS: "back", ArrowDown: "back",
  KeyA: "left", ArrowLeft: "left", KeyD: "right", ArrowRight: "right",
  KeyQ: "look_up", KeyE: "look_down",
};
let ws = null, pid = "", episode = null, driving = false, allowBack = true;
const held = new Set();
let lastSent = "", frameUrl = null, frames = [];

function show(id) {
  for (const s of ["login", "consent", "message", "drive"]) $(s).classList.toggle("hidden", s !== id);
}
function message(title, text) { $("message-title").textContent = title; $("message-text").textContent = text; show("message"); }
function send(obj) { if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(obj)); }
function sendKeys() {
  const keys = driving ? [...held].sort() : [];
  const text = keys.join(",");
  if (text !== lastSent) { lastSent = text; send({ type: "keys", keys }); }
}

function openModal() {
  $("modal-instruction").textContent = episode.instruction;
  $("modal-resume").classList.toggle("hidden", !episode.resumed);
  $("modal-end").classList.toggle("hidden", !episode.resumed);
  $("modal-go").textContent = episode.resumed ? "Resume" : "Start driving";
  $("instruction-modal").classList.remove("hidden");
  driving = false; held.clear(); sendKeys();
  $("modal-go").focus();
}
function closeModal() { $("instruction-modal").classList.add("hidden"); }

function onEpisode(msg) {
  episode = msg;
  $("ep-index").textContent = msg.index; $("ep-total").textContent = msg.total;
  $("ep-instruction").textContent = msg.instruction;
  show("drive"); openModal();
}

function connect() {
  const proto = location.protocol === "https:" ? "wss" : "ws";
  ws = new WebSocket(`${proto}://${location.host}/ws?pid=${encodeURIComponent(pid)}`);
  ws.binaryType = "blob";
  ws.onmessage = (ev) => {
    if (typeof ev.data !== "string") {
      if (frameUrl) URL.revokeObjectURL(frameUrl);
      frameUrl = URL.createObjectURL(ev.data);
      $("view").src = frameUrl;
      const now = performance.now(); frames.push(now);
      while (frames.length && frames[0] < now - 1000) frames.shift();
      return;
    }
    const msg = JSON.parse(ev.data);
    if (msg.type === "refused") { ws.onclose = null; message("Already connected", msg.message); }
    else if (msg.type === "welcome") {
      $("title").textContent = msg.title; $("who").textContent = msg.participant; allowBack = msg.allow_backward;
      $("back-row").classList.toggle("hidden", !allowBack);
      if (msg.consented) send({ type: "next" }); else { $("consent-text").textContent = msg.consent; show("consent"); $("agree").focus(); }
    }
    else if (msg.type === "episode") onEpisode(msg);
    else if (msg.type === "episode_end") {
      driving = false; held.clear(); sendKeys();
      $("status").textContent = msg.termination === "failure" ? "episode ended: collision (" + (msg.failure || "") + ")" : "episode ended";
    }
    else if (msg.type === "complete") message("Thank you!", `You finished all ${msg.total} episodes. You may close this tab.`);
    else if (msg.type === "ready") $("status").textContent = driving ? "driving" : "ready";
    else if (msg.type === "error") $("status").textContent = "error: " + msg.message;
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
  driving = false; held.clear(); sendKeys();
});

document.addEventListener("keydown", (ev) => {
  if (!$("instruction-modal").classList.contains("hidden") || $("drive").classList.contains("hidden")) return;
  if (ev.code === "Enter" && driving) { ev.preventDefault(); driving = false; held.clear(); sendKeys(); send({ type: "finish" }); return; }
  const key = KEYMAP[ev.code];
  if (!key || !driving) return;
  ev.preventDefault();
  if (key === "back" && !allowBack) return;
  held.add(key); sendKeys();  // auto-repeat keydowns leave the set unchanged: nothing is queued
});
document.addEventListener("keyup", (ev) => { const key = KEYMAP[ev.code]; if (key) { held.delete(key); sendKeys(); } });
window.addEventListener("blur", () => { held.clear(); sendKeys(); });
setInterval(() => { $("fps").textContent = frames.length; }, 500);

const saved = sessionStorage.getItem("vlnverse-pid");
if (saved) $("pid").value = saved;
