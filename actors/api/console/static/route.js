// One route: its state, the manual actions its state accepts (each naming the generation
// the page shows, fenced by the runtime), its attempt timeline, and its retry notice.
// A refused action (409) shows the route's fresh snapshot from the answer and says so.
// The countdown only counts: the runtime fires deadlines, this page never does.
"use strict";

(() => {
  const data = Console.embedded("route-data");
  if (!data) return;
  let snapshot = data.snapshot;
  let history = data.history;
  const routeId = snapshot.route_id;
  const message = document.getElementById("message");
  const actions = document.getElementById("actions");
  const notices = document.getElementById("notices");
  const changed = document.getElementById("changed");
  const SVG = "http://www.w3.org/2000/svg";

  function say(text, error) {
    message.hidden = !text;
    message.textContent = text;
    message.classList.toggle("error", Boolean(error));
  }

  function fact(name, content) {
    const target = document.querySelector(`[data-fact="${name}"]`);
    target.replaceChildren(content);
  }

  function showSnapshot() {
    fact("state", Console.stateBadge(snapshot.state));
    fact("generation", String(snapshot.generation));
    fact("candidate_id", snapshot.candidate_id || "—");
    fact("error_class", snapshot.error_class || "—");
    const summary = snapshot.code ? `${data.summaries[snapshot.code] || "the provider failed"} (${snapshot.code})` : "—";
    fact("cause", summary);
    fact("retry", `${snapshot.retry_ordinal} / ${snapshot.retry_max}`);
    fact("deadline", Console.deadlineNodes(snapshot.deadline));
    fact("next", snapshot.pending_outcome || snapshot.next_step || "—");
    fact("caller", snapshot.caller || "—");
    document.getElementById("action-generation").textContent = String(snapshot.generation);
    const buttons = (data.valid_actions[snapshot.state] || []).map((action) => {
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.action = action;
      button.textContent = data.labels[action];
      return button;
    });
    actions.replaceChildren(...buttons);
    Console.tick();
  }

  // ---- the timeline -----------------------------------------------------------------

  function node(name, attributes, text) {
    const element = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
    if (text !== undefined) element.textContent = text;
    return element;
  }

  /** Decisions as dots on a time axis, waits as bars from the decision to its deadline
   *  (a vertical line), "now" dashed. */
  function drawTimeline() {
    const figure = document.getElementById("timeline");
    const width = 800;
    const height = 130;
    const left = 20;
    const right = width - 20;
    const axis = 100;
    const times = [Date.now()];
    for (const record of history) {
      times.push(new Date(record.at).getTime());
      if (record.deadline) times.push(new Date(record.deadline).getTime());
    }
    if (snapshot.deadline) times.push(new Date(snapshot.deadline).getTime());
    let first = Math.min(...times);
    let last = Math.max(...times);
    if (last - first < 10000) last = first + 10000;
    const pad = (last - first) * 0.04;
    first -= pad;
    last += pad;
    const x = (moment) => left + ((moment - first) / (last - first)) * (right - left);
    const svg = node("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": `attempt timeline of route ${routeId}` });
    svg.append(node("line", { class: "axis", x1: left, x2: right, y1: axis, y2: axis }));
    for (let step = 0; step <= 4; step += 1) {
      const moment = first + ((last - first) * step) / 4;
      const label = new Date(moment).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
      svg.append(node("line", { class: "axis", x1: x(moment), x2: x(moment), y1: axis, y2: axis + 5 }));
      const anchor = step === 0 ? "start" : step === 4 ? "end" : "middle";
      svg.append(node("text", { class: "tick", x: x(moment), y: axis + 18, "text-anchor": anchor }, label));
    }
    history.forEach((record, index) => {
      const at = new Date(record.at).getTime();
      if (record.deadline) {
        // A wait lasts until its deadline, or until the next decision came first (a
        // cancel, a retry now): then its deadline is drawn dashed, superseded.
        const until = new Date(record.deadline).getTime();
        const next = history[index + 1];
        const ended = next ? Math.min(until, new Date(next.at).getTime()) : until;
        svg.append(node("rect", { class: "wait", x: x(at), y: axis - 14, width: Math.max(x(ended) - x(at), 1), height: 8 }));
        const kind = ended < until ? "deadline superseded" : "deadline";
        svg.append(node("line", { class: kind, x1: x(until), x2: x(until), y1: axis - 24, y2: axis }));
      }
      const dot = node("circle", { class: `dot ${record.decision}`, cx: x(at), cy: axis - 10, r: 5 });
      dot.append(node("title", {}, `${record.decision} at ${Console.localTime(record.at)}`
        + (record.code ? ` (${record.code})` : "")));
      svg.append(dot);
      const row = 14 + (index % 4) * 16;
      const anchor = x(at) > right - 60 ? "end" : x(at) < left + 60 ? "start" : "middle";
      svg.append(node("text", { class: "label", x: x(at), y: row, "text-anchor": anchor },
        `${record.decision}${record.generation > 1 ? ` g${record.generation}` : ""}`));
      svg.append(node("line", { class: "axis", x1: x(at), x2: x(at), y1: row + 3, y2: axis - 15, "stroke-dasharray": "1 3" }));
    });
    const now = Date.now();
    svg.append(node("line", { class: "now", x1: x(now), x2: x(now), y1: 4, y2: axis + 6 }));
    figure.replaceChildren(svg);
    const list = document.getElementById("history");
    list.replaceChildren(...history.map((record) => {
      const item = document.createElement("li");
      item.textContent = `${Console.localTime(record.at)} · generation ${record.generation} · ${record.decision}`
        + (record.code ? ` · ${record.code}` : "")
        + (record.deadline ? ` · until ${Console.localTime(record.deadline)}` : "");
      return item;
    }));
  }

  async function reloadHistory() {
    const answer = await Console.api("GET", `/routes/${encodeURIComponent(routeId)}/history`);
    if (answer.ok) history = answer.body;
    drawTimeline();
  }

  // ---- actions ------------------------------------------------------------------------

  async function act(action) {
    for (const button of actions.querySelectorAll("button")) button.disabled = true;
    const label = data.labels[action];
    const generation = snapshot.generation;
    const answer = await Console.api("POST",
      `/routes/${encodeURIComponent(routeId)}/actions/${action}`, { generation });
    if (answer.ok) {
      snapshot = answer.body;
      say(`${label}: done. The route is ${snapshot.state} now.`, false);
    } else if (answer.body && answer.body.snapshot) {
      snapshot = answer.body.snapshot;
      say(`${label} was not applied: the route had moved on (${answer.body.message}). `
        + `Its current state is shown: ${snapshot.state}, generation ${snapshot.generation}.`, true);
    } else {
      const why = answer.body ? answer.body.message : `the server answered ${answer.status}`;
      say(`${label} failed: ${why}.`, true);
    }
    changed.hidden = true;
    showSnapshot();
    await reloadHistory();
  }

  actions.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (button) act(button.dataset.action);
  });

  // ---- the retry notice -------------------------------------------------------------

  function noticeCard(notice) {
    const card = document.createElement("article");
    card.className = "notice";
    card.dataset.notice = notice.id;
    card.dataset.task = notice.task_id;
    const text = document.createElement("p");
    text.className = "notice-text";
    text.textContent = notice.content;
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.setAttribute("data-cancel-notice", "");
    cancel.textContent = "Cancel";
    card.append(text, cancel);
    return card;
  }

  function removeNotice(id) {
    const card = notices.querySelector(`[data-notice="${CSS.escape(id)}"]`);
    if (card) card.remove();
  }

  function noticeChanged(event) {
    if (event.session_id !== routeId) return;
    if (event.event === "session.message.deleted") {
      removeNotice(event.message_id);
      return;
    }
    const notice = event.message;
    if (!notice || notice.metadata.retrying !== true) {
      removeNotice(event.message_id);
      return;
    }
    const card = noticeCard(notice);
    const existing = notices.querySelector(`[data-notice="${CSS.escape(notice.id)}"]`);
    if (existing) existing.replaceWith(card);
    else notices.append(card);
  }

  notices.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-cancel-notice]");
    if (!button) return;
    button.disabled = true;
    const card = button.closest("[data-notice]");
    const answer = await Console.api("POST",
      `/sessions/${encodeURIComponent(routeId)}/cancel-transient-retry`, { task_id: card.dataset.task });
    if (answer.ok) {
      snapshot = answer.body.snapshot;
      say("Retrying cancelled: the route waits for a manual action.", false);
      showSnapshot();
      await reloadHistory();
    } else {
      button.disabled = false;
      say(`Cancel failed: ${answer.body ? answer.body.message : answer.status}.`, true);
    }
  });

  // ---- changes made elsewhere ----------------------------------------------------------
  // The page keeps the snapshot it showed (its actions name that generation, as a person
  // decided on it) and says when the route moved on; the fresh state is one click away.

  async function routeChanged(event) {
    if (event.route_id !== routeId) return;
    reloadHistory();
    // The event may be older than the snapshot shown (events are followed from before the
    // page was read): the route as it is now decides whether it changed.
    const answer = await Console.api("GET", `/routes/${encodeURIComponent(routeId)}`);
    if (!answer.ok) return;
    const now = answer.body;
    const same = now.state === snapshot.state && now.generation === snapshot.generation;
    changed.hidden = same;
    document.getElementById("changed-text").textContent = same ? ""
      : `The route changed meanwhile: it is ${now.state} at generation ${now.generation} now. `
        + `The actions below still name generation ${snapshot.generation}; a stale one is refused.`;
  }

  document.getElementById("show-current").addEventListener("click", async () => {
    const answer = await Console.api("GET", `/routes/${encodeURIComponent(routeId)}`);
    if (!answer.ok) return;
    snapshot = answer.body;
    changed.hidden = true;
    say("", false);
    showSnapshot();
  });

  Console.follow({
    "session.message.updated": noticeChanged,
    "session.message.deleted": noticeChanged,
    "route.transition": routeChanged,
  });
  showSnapshot();
  drawTimeline();
})();
