// The web console's shared helpers: JSON calls to the API, times in the browser's zone,
// countdowns. Plain JavaScript, no library, no build step.
//
// Every call to the API goes to the same origin with the console's HttpOnly cookie (the
// browser adds it; no script can read it) and `X-Requested-With`, which the API requires
// of a write authenticated by that cookie: a page of another site cannot send it.
"use strict";

const Console = (() => {
  /** One JSON request: resolves {ok, status, body} (body: the parsed JSON, or null). */
  async function api(method, path, body) {
    const headers = { "X-Requested-With": "console", Accept: "application/json" };
    const init = { method, headers, credentials: "same-origin" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const answer = await fetch(path, init);
    let parsed = null;
    if (answer.status !== 204) {
      try { parsed = await answer.json(); } catch (_error) { parsed = null; }
    }
    return { ok: answer.ok, status: answer.status, body: parsed };
  }

  /** A JSON document the server embedded in the page (<script type="application/json">). */
  function embedded(id) {
    const element = document.getElementById(id);
    return element ? JSON.parse(element.textContent) : null;
  }

  const UNITS = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]];

  /** Whole units from days to seconds: "1 h 5 min", as the policy package words them. */
  function duration(seconds) {
    let left = Math.round(seconds);
    if (left <= 0) return "0 s";
    const parts = [];
    for (const [name, size] of UNITS) {
      const count = Math.floor(left / size);
      left -= count * size;
      if (count) parts.push(`${count} ${name}`);
    }
    return parts.join(" ");
  }

  /** An absolute time in this browser's zone, with the zone's name. */
  function localTime(iso) {
    const moment = new Date(iso);
    if (Number.isNaN(moment.getTime())) return iso;
    return moment.toLocaleString(undefined, {
      year: "numeric", month: "short", day: "numeric", hour: "2-digit",
      minute: "2-digit", second: "2-digit", timeZoneName: "short",
    });
  }

  /** Show every <time data-deadline> in the browser's zone. */
  function localise(root) {
    for (const element of (root || document).querySelectorAll("time[data-deadline]")) {
      element.textContent = localTime(element.getAttribute("datetime"));
    }
  }

  /** Refresh every countdown beside a deadline. A countdown that ends only says so: the
   *  runtime owns the timer, the browser never dispatches anything. */
  function tick() {
    const now = Date.now();
    for (const element of document.querySelectorAll("[data-countdown]")) {
      const time = element.parentElement.querySelector("time[data-deadline]");
      if (!time) continue;
      const left = (new Date(time.getAttribute("datetime")).getTime() - now) / 1000;
      element.textContent = left > 0 ? `(in ${duration(left)})` : "(due: the runtime fires it)";
    }
  }

  /** A <time data-deadline> with its countdown, built as nodes (never as HTML text). */
  function deadlineNodes(iso) {
    const fragment = document.createDocumentFragment();
    if (!iso) { fragment.append("—"); return fragment; }
    const time = document.createElement("time");
    time.dateTime = iso;
    time.setAttribute("data-deadline", "");
    time.textContent = localTime(iso);
    const countdown = document.createElement("span");
    countdown.className = "countdown";
    countdown.setAttribute("data-countdown", "");
    fragment.append(time, " ", countdown);
    return fragment;
  }

  /** A state badge. */
  function stateBadge(state) {
    const badge = document.createElement("span");
    badge.className = `state state-${state}`;
    badge.textContent = state;
    return badge;
  }

  /** The live event stream (Server-Sent Events, resumed by the browser with its last id),
   *  from the cursor the server read before it rendered the page, so no change made in
   *  between is missed. `handlers`: event name -> function(data). `status(text)` hears
   *  the connection state. */
  function follow(handlers, status) {
    const since = document.body.dataset.eventsSince;
    const query = since ? `?last_event_id=${encodeURIComponent(since)}` : "";
    const source = new EventSource(`/events${query}`);
    source.onopen = () => status && status("open");
    source.onerror = () => status && status("reconnecting");
    for (const [name, handler] of Object.entries(handlers)) {
      source.addEventListener(name, (event) => handler(JSON.parse(event.data)));
    }
    return source;
  }

  document.addEventListener("DOMContentLoaded", () => {
    localise();
    tick();
    window.setInterval(tick, 1000);
  });

  return { api, embedded, duration, localTime, localise, tick, deadlineNodes, stateBadge, follow };
})();
