// The tip prompt of a virtual terminal that waits for a person, on its card
// of the console (app.js calls renderTip; act, money, flash and state are
// app.js's).
"use strict";

// renderTip shows the tip prompt a waiting terminal asks (d.tipPrompt):
// a button per suggestion, "No tip", and the other amount (ENTER_TOTAL:
// the total) typed as a person writes it. Rebuilt only when the prompt
// changes, so that typing is not interrupted.
function renderTip(box, d) {
  const p = d.tipPrompt;
  const key = p ? JSON.stringify(p) : "";
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  box.hidden = !p;
  box.replaceChildren();
  if (!p) return;
  // The answer names its prompt (the sale's onlineAPIRefId): the server
  // refuses it once that prompt no longer waits (a second click), so it
  // never becomes the tip of the next sale.
  const tip = (amount) => act(d.serialNumber, `tip?onlineAPIRefId=${encodeURIComponent(p.onlineAPIRefId)}&tipAmount=${amount}`);
  const button = (label, amount) => {
    const b = document.createElement("button");
    b.textContent = label;
    b.addEventListener("click", () => tip(amount));
    box.append(b);
  };
  (p.options || []).forEach((o) => button(`${o.percent}% · ${money(o.tipAmount, p.currency)}`, o.tipAmount));
  button("No tip", 0);
  const input = document.createElement("input");
  input.placeholder = p.mode === "ENTER_TOTAL" ? "Total" : "Other tip";
  input.setAttribute("aria-label", input.placeholder);
  const ok = document.createElement("button");
  ok.textContent = "OK";
  ok.addEventListener("click", () => {
    const typed = minor(input.value, p.currency);
    if (typed == null) return flash("Type an amount such as 12.50");
    const t = p.mode === "ENTER_TOTAL" ? typed - p.amount : typed;
    if (t < 0) return flash("The total is below the amount");
    tip(t);
  });
  box.append(input, ok);
}

// minor reads an amount a person typed ("12.50", "12,50") in minor units
// of cur; null when it is not one.
function minor(text, cur) {
  const e = Object.hasOwn(state.digits, cur) ? state.digits[cur] : 2;
  const m = /^\s*(\d+)(?:[.,](\d*))?\s*$/.exec(text);
  if (!m || (m[2] || "").length > e) return null;
  return Number(m[1] + (m[2] || "").padEnd(e, "0"));
}
