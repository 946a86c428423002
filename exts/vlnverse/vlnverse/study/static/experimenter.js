// vlnverse study, experimenter page: who is connected, progress per participant, end / resume a session.
"use strict";
const $ = (id) => document.getElementById(id);
const TOKEN = new URLSearchParams(location.search).get("token") || "";
const HEADERS = { "X-Experimenter-Token": TOKEN };

async function call(method, url) {
  const r = await fetch(url, { method, headers: HEADERS });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function cell(row, text, cls) { const td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; row.appendChild(td); return td; }

async function refresh() {
  try {
    const data = await call("GET", "/api/experimenter/status");
    $("title").textContent = data.title;
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
      const act = cell(row, "");
      if (!p.withdrawn) {
        const b = document.createElement("button");
        b.className = p.ended_by_experimenter ? "" : "secondary";
        b.textContent = p.ended_by_experimenter ? "Resume" : "End session";
        b.dataset.action = p.ended_by_experimenter ? "resume" : "end";
        b.onclick = async () => { await call("POST", `/api/experimenter/${b.dataset.action}?pid=${encodeURIComponent(p.participant)}`); refresh(); };
        act.appendChild(b);
      }
      body.appendChild(row);
    }
    $("updated").textContent = new Date().toLocaleTimeString();
    $("error").textContent = "";
  } catch (err) { $("error").textContent = err.message; }
}
refresh();
setInterval(refresh, 2000);
