// The live routes table: rows rendered by the server, then kept current from the event
// stream (GET /events): each route.transition names a route, whose snapshot is read
// again (GET /routes/{id}) and its row redrawn. Filters hide rows in place. Every value
// is set as text, never as HTML.
"use strict";

(() => {
  const table = document.getElementById("routes");
  if (!table) return;
  const body = table.tBodies[0];
  const filters = document.getElementById("filters");
  const summaries = Console.embedded("summaries") || {};
  const live = document.getElementById("live");
  const empty = document.getElementById("no-routes");

  function cell(label, content) {
    const td = document.createElement("td");
    td.dataset.label = label;
    if (content instanceof Node) td.append(content);
    else td.textContent = content;
    return td;
  }

  function cause(code) {
    if (!code) return "—";
    const fragment = document.createDocumentFragment();
    const muted = document.createElement("span");
    muted.className = "muted";
    muted.textContent = `(${code})`;
    fragment.append(`${summaries[code] || "the provider failed"} `, muted);
    return fragment;
  }

  /** A row for a snapshot, in the server's column order. */
  function row(route) {
    const tr = document.createElement("tr");
    tr.dataset.route = route.route_id;
    tr.dataset.state = route.state;
    tr.dataset.caller = route.caller || "";
    tr.dataset.candidate = route.candidate_id || "";
    const link = document.createElement("a");
    link.href = `/console/routes/${encodeURIComponent(route.route_id)}`;
    link.textContent = route.route_id;
    tr.append(
      cell("Route", link),
      cell("State", Console.stateBadge(route.state)),
      cell("Candidate", route.candidate_id || "—"),
      cell("Class", route.error_class || "—"),
      cell("Cause", cause(route.code)),
      cell("Retry", `${route.retry_ordinal} / ${route.retry_max}`),
      cell("Deadline", Console.deadlineNodes(route.deadline)),
      cell("Next", route.pending_outcome || route.next_step || "—"),
      cell("Caller", route.caller || "—"),
    );
    return tr;
  }

  function matches(tr) {
    const wanted = new FormData(filters);
    const state = wanted.get("state");
    const candidate = (wanted.get("candidate") || "").trim();
    const caller = (wanted.get("caller") || "").trim();
    return (!state || tr.dataset.state === state)
      && (!candidate || tr.dataset.candidate === candidate)
      && (!caller || tr.dataset.caller === caller);
  }

  function applyFilters() {
    let shown = 0;
    for (const tr of body.rows) {
      tr.hidden = !matches(tr);
      if (!tr.hidden) shown += 1;
    }
    empty.hidden = shown > 0;
  }

  /** Insert or replace the route's row, keeping the table in route id order. */
  function upsert(route) {
    const fresh = row(route);
    fresh.classList.add("fresh");
    const existing = Array.from(body.rows).find((tr) => tr.dataset.route === route.route_id);
    if (existing) {
      existing.replaceWith(fresh);
    } else {
      const after = Array.from(body.rows).find((tr) => tr.dataset.route > route.route_id);
      body.insertBefore(fresh, after || null);
    }
    fresh.hidden = !matches(fresh);
    applyFilters();
    Console.tick();
  }

  async function changed(event) {
    const answer = await Console.api("GET", `/routes/${encodeURIComponent(event.route_id)}`);
    if (answer.ok) upsert(answer.body);
  }

  filters.addEventListener("input", () => {
    applyFilters();
    const query = new URLSearchParams();
    for (const [name, value] of new FormData(filters)) if (value) query.set(name, value);
    const text = query.toString();
    window.history.replaceState(null, "", `/console/routes${text ? `?${text}` : ""}`);
  });
  filters.addEventListener("submit", (event) => { event.preventDefault(); applyFilters(); });

  Console.follow({ "route.transition": changed }, (state) => {
    live.dataset.live = state;
    live.textContent = state === "open" ? "live" : "reconnecting…";
  });
  applyFilters();
})();
