// The day closes on the console: a Close button per linked terminal ID
// (the Terminal IDs table) and the last closes with their totals and
// differences, from GET /in-store/api/v1/batches at load and batch.closed
// events after. app.js calls loadBatches, keepBatch and renderBatches;
// $, api, headers, flash, money, time, cell and el are app.js's (this file
// loads after it).
"use strict";

const batches = new Map();

// loadBatches reads the closes of the last 29 days (a listing covers at
// most 30), the newest 20.
async function loadBatches(signal) {
  const since = new Date(Date.now() - 29 * 86400e3).toISOString();
  const page = await api(`/batches?limit=20&from=${encodeURIComponent(since)}`, { signal });
  page.batches.forEach(keepBatch);
}

function keepBatch(b) {
  batches.set(b.batchId, b);
}

// closeTerminal closes the batch of a terminal ID with the page's
// credentials, as an ECR would (POST /terminal/{terminalId}/close); the
// answer is the batch, and batch.closed follows.
async function closeTerminal(terminalId, button) {
  button.disabled = true;
  try {
    const resp = await fetch(`${API}/terminal/${encodeURIComponent(terminalId)}/close`,
      { method: "POST", headers: { ...headers(), "Accept": "application/json" } });
    const body = await resp.json().catch(() => ({}));
    if (resp.ok) {
      keepBatch(body);
      renderBatches(body.batchId);
    } else {
      flash(body.detail || body.title || `Close failed (${resp.status})`);
    }
  } finally {
    button.disabled = false;
  }
}

// batchOutcome says how a close ended: MATCHED, the number of
// differences, or its state (and error) while not CLOSED.
function batchOutcome(b) {
  if (b.state !== "CLOSED") return b.state + (b.errorCode ? ` ${b.errorCode}` : "");
  if (b.matched) return "MATCHED";
  return b.differences.length === 1 ? "1 difference" : `${b.differences.length} differences`;
}

function batchTotals(list) {
  return list.length ? list.map((t) => `${t.type} ${t.count} · ${money(t.amount, t.currency)}`).join(", ") : "none";
}

function batchSide(it) {
  return it ? `${it.type} ${it.status} ${money(it.amount, it.currency)}${it.offline ? " offline" : ""}` : "none";
}

function renderBatches(fresh) {
  const rows = [...batches.values()].sort((a, b) => (a.closedAt < b.closedAt ? 1 : a.closedAt > b.closedAt ? -1 : 0)).slice(0, 20);
  $("#batches tbody").replaceChildren(...rows.map((b) => {
    const tr = document.createElement("tr");
    tr.dataset.batchId = b.batchId;
    if (b.batchId === fresh) tr.className = "fresh";
    const list = el("ol", null, "ops diffs");
    for (const d of b.differences) {
      const li = el("li", null, "diff");
      li.dataset.ref = d.onlineAPIRefId;
      li.append(el("span", d.kind, "type"), el("span", d.onlineAPIRefId, "ref"),
        el("span", `terminal: ${batchSide(d.terminal)}; service: ${batchSide(d.service)}`, "sides"));
      list.append(li);
    }
    const diffs = el("td");
    diffs.append(list);
    const ok = b.state === "CLOSED" && b.matched;
    tr.append(cell(time(b.closedAt)), cell(b.terminalId), cell(b.number == null ? "" : String(b.number), "num"),
      cell(batchOutcome(b), `status outcome ${ok ? "s0" : "bad"}`), cell(batchTotals(b.terminalTotals), "totals terminal"),
      cell(batchTotals(b.serviceTotals), "totals service"), diffs, cell(b.batchId, "ref"));
    return tr;
  }));
  $("#batches-empty").hidden = rows.length > 0;
}

// closeCell is the Terminal IDs table's cell with the Close button of a
// linked terminal ID.
function closeCell(t) {
  const td = el("td");
  if (t.linked) {
    const b = el("button", "Close", "close-batch");
    b.type = "button";
    b.dataset.close = t.terminalId;
    b.setAttribute("aria-label", `Close the batch of terminal ${t.terminalId}`);
    td.append(b);
  }
  return td;
}

$("#terminals tbody").addEventListener("click", (ev) => {
  const b = ev.target.closest("button[data-close]");
  if (b) closeTerminal(b.dataset.close, b);
});
