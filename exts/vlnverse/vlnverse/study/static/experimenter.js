// vlnverse study, experimenter page: who is connected, progress per participant; end / resume a
// session, a resume code for another device, withdraw. The experimenter token travels in an HttpOnly
// cookie (set when the printed link was first opened), never in this page's URL or script.
"use strict";
const $ = (id) => document.getElementById(id);

async function call(method, url) {
  const r = await fetch(url, { method, credentials: "same-origin" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function cell(row, text, cls) { const td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; row.appendChild(td); return td; }

// a confirmation in the page: resolves true only for the destructive button, never on Enter
function ask(title, text, yes) {
  return new Promise((resolve) => {
    $("ask-title").textContent = title; $("ask-text").textContent = text; $("ask-yes").textContent = yes;
    $("ask").classList.remove("hidden"); $("ask-no").focus();
    const done = (value) => { $("ask").classList.add("hidden"); $("ask-yes").onclick = $("ask-no").onclick = null; resolve(value); };
    $("ask-yes").onclick = () => done(true);
    $("ask-no").onclick = () => done(false);
  });
}

function button(label, cls, action) {
  const b = document.createElement("button");
  b.textContent = label; b.className = cls; b.dataset.action = action;
  return b;
}

async function act(p, action) {
  const pid = encodeURIComponent(p.participant);
  try {
    if (action === "end") {
      if (!(await ask("End this session?", `${p.participant}'s page stops at once and their id is refused until you resume it. Every row logged so far is kept.`, "End session"))) return;
      await call("POST", `/api/experimenter/end?pid=${pid}`);
    } else if (action === "resume") {
      await call("POST", `/api/experimenter/resume?pid=${pid}`);
    } else if (action === "code") {
      const r = await call("POST", `/api/experimenter/resume-code?pid=${pid}`);
      $("code-pid").textContent = r.participant; $("code-value").textContent = r.code; $("code-min").textContent = Math.round(r.expires_s / 60);
      $("code").classList.remove("hidden"); $("code-close").focus();
    } else if (action === "withdraw") {
      if (!(await ask(`Withdraw ${p.participant}?`, `${p.participant} leaves the study and the id cannot be used again. ` +
        (window.withdrawData === "delete" ? "Their data recorded so far is deleted." : "Their data recorded so far is kept."), "Withdraw"))) return;
      await call("POST", `/api/experimenter/withdraw?pid=${pid}&confirm=yes`);
    }
  } catch (err) { $("error").textContent = err.message; }
  refresh();
}

async function refresh() {
  try {
    const data = await call("GET", "/api/experimenter/status");
    $("title").textContent = data.title;
    window.withdrawData = data.withdraw_data;
    const online = data.participants.filter((p) => p.connected).length;
    $("summary").textContent = `${data.participants.length} participant(s), ${online} connected, ${data.episodes} episodes`;
    const body = $("participants").querySelector("tbody");
    body.innerHTML = "";
    for (const p of data.participants) {
      const row = document.createElement("tr"); row.dataset.participant = p.participant;
      cell(row, p.participant);
      cell(row, p.connected ? "yes" : "no", p.connected ? "ok" : "muted");
      cell(row, p.consented ? "yes" : "no");
      cell(row, `${p.done} / ${p.total}`, "progress");
      cell(row, p.current || "—");
      cell(row, p.withdrawn ? "withdrawn" : p.ended_by_experimenter ? "ended by you" : p.current ? (p.connected ? "driving" : "away") : "complete", "state");
      const actions = cell(row, "");
      actions.className = "actions";
      if (!p.withdrawn) {
        const buttons = [p.ended_by_experimenter ? button("Resume", "", "resume") : button("End session", "danger", "end"),
                         button("Resume code", "secondary", "code"), button("Withdraw", "danger", "withdraw")];
        for (const b of buttons) { b.onclick = () => act(p, b.dataset.action); actions.appendChild(b); }
      }
      body.appendChild(row);
    }
    $("updated").textContent = new Date().toLocaleTimeString();
    $("error").textContent = "";
  } catch (err) { $("error").textContent = err.message; }
}
$("code-close").onclick = () => $("code").classList.add("hidden");
// Enter and Space never press a button of a confirmation: each needs its own click
document.addEventListener("keydown", (ev) => {
  if (!$("ask").classList.contains("hidden") && ["Enter", "NumpadEnter", "Space"].includes(ev.code)) { ev.preventDefault(); ev.stopPropagation(); }
}, true);
refresh();
setInterval(refresh, 2000);
