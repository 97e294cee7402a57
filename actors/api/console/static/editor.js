// The dynamic profile editor: candidates in order, each with its Transient errors and
// Hard errors policies; the derived schedule as the values change; inline checks with the
// backend's own limits (embedded by the server from the policy package); Save through
// POST /profiles or PUT /profiles/{id}, then the normalised document as stored. The
// backend stays the judge: its field-addressed errors are shown beside their fields.
"use strict";

(() => {
  const form = document.getElementById("editor");
  if (!form) return;
  const list = document.getElementById("candidates");
  const template = document.getElementById("candidate-template");
  const limits = Console.embedded("limits");
  const status = document.getElementById("status");
  const CLASSES = ["transient", "hard"];
  const LABELS = { transient: "Transient errors", hard: "Hard errors" };
  const DEFAULTS = { max_retries: 3, initial_interval_seconds: 5, max_wait_seconds: 3600 };

  const rows = () => Array.from(list.querySelectorAll("[data-candidate]"));
  const field = (root, path) => root.querySelector(`[data-field="${path}"]`);

  // ---- reading the form -------------------------------------------------------------

  function optional(text) {
    const value = text.trim();
    return value === "" ? null : value;
  }

  /** A number field as JSON: a whole number when the box holds one, else what it holds
   *  (null when empty), so the backend names the problem itself. */
  function numberValue(input) {
    if (input.value.trim() === "") return null;
    const parsed = Number(input.value);
    return Number.isFinite(parsed) ? parsed : input.value;
  }

  function classPolicy(row, cls) {
    const retryOn = field(row, `${cls}.retry.enabled`).checked;
    const waitOn = field(row, `${cls}.wait_for_reset.enabled`).checked;
    const chosen = row.querySelector(`[data-field="${cls}.on_exhausted"]:checked`);
    const number = (name) => numberValue(field(row, name));
    return {
      retry: retryOn
        ? { enabled: true, max_retries: number(`${cls}.retry.max_retries`),
            initial_interval_seconds: number(`${cls}.retry.initial_interval_seconds`) }
        : { enabled: false, max_retries: 0, initial_interval_seconds: 0 },
      wait_for_reset: waitOn
        ? { enabled: true, max_wait_seconds: number(`${cls}.wait_for_reset.max_wait_seconds`) }
        : { enabled: false, max_wait_seconds: 0 },
      on_exhausted: chosen ? chosen.value : null,
    };
  }

  function candidate(row) {
    const text = (name) => optional(field(row, name).value);
    return {
      id: field(row, "id").value.trim(), agent: field(row, "agent").value.trim(),
      provider: text("provider"), model: text("model"), account: text("account"),
      enabled: field(row, "enabled").checked,
      transient: classPolicy(row, "transient"), hard: classPolicy(row, "hard"),
    };
  }

  function profileDocument() {
    const name = optional(form.querySelector('[data-profile-field="name"]').value);
    const document_ = { version: 1, candidates: rows().map(candidate) };
    if (name !== null) document_.name = name;
    return document_;
  }

  // ---- writing the form ---------------------------------------------------------------

  function fillRow(row, data) {
    for (const name of ["id", "agent", "provider", "model", "account"]) {
      field(row, name).value = data[name] || "";
    }
    field(row, "enabled").checked = data.enabled !== false;
    for (const cls of CLASSES) {
      const policy = data[cls];
      field(row, `${cls}.retry.enabled`).checked = policy.retry.enabled;
      field(row, `${cls}.wait_for_reset.enabled`).checked = policy.wait_for_reset.enabled;
      const numbers = {
        "retry.max_retries": policy.retry.max_retries,
        "retry.initial_interval_seconds": policy.retry.initial_interval_seconds,
        "wait_for_reset.max_wait_seconds": policy.wait_for_reset.max_wait_seconds,
      };
      for (const [path, value] of Object.entries(numbers)) {
        field(row, `${cls}.${path}`).value = value ? String(value) : "";
      }
      for (const radio of row.querySelectorAll(`[data-field="${cls}.on_exhausted"]`)) {
        radio.checked = radio.value === policy.on_exhausted;
      }
    }
  }

  function newRow() {
    const row = template.content.firstElementChild.cloneNode(true);
    list.append(row);
    renumber(); // its radio groups get their own names before anything is checked
    return row;
  }

  function fill(document_) {
    list.replaceChildren();
    for (const data of document_.candidates) fillRow(newRow(), data);
    form.querySelector('[data-profile-field="name"]').value = document_.name || "";
    refresh();
  }

  /** Ids, label targets and radio groups follow a row's position. */
  function renumber() {
    rows().forEach((row, index) => {
      row.querySelector("[data-ordinal]").textContent = String(index + 1);
      const prefix = (value) => value.replace(/^c[^-]*-/, `c${index}-`);
      for (const element of row.querySelectorAll("[id]")) element.id = prefix(element.id);
      for (const label of row.querySelectorAll("label[for]")) label.htmlFor = prefix(label.htmlFor);
      for (const element of row.querySelectorAll("[aria-labelledby]")) {
        element.setAttribute("aria-labelledby", prefix(element.getAttribute("aria-labelledby")));
      }
      for (const radio of row.querySelectorAll('input[type="radio"]')) radio.name = prefix(radio.name);
      row.querySelector('[data-move="-1"]').disabled = index === 0;
      row.querySelector('[data-move="1"]').disabled = index === rows().length - 1;
      row.querySelector("[data-remove]").disabled = rows().length === 1;
    });
    document.getElementById("add-candidate").disabled = rows().length >= limits.candidates;
  }

  /** A disabled section's numbers cannot be edited (they are stored as zero); enabling
   *  one fills an empty box with a sensible start. */
  function syncSections(row) {
    for (const cls of CLASSES) {
      const sections = {
        retry: ["max_retries", "initial_interval_seconds"],
        wait_for_reset: ["max_wait_seconds"],
      };
      for (const [section, names] of Object.entries(sections)) {
        const on = field(row, `${cls}.${section}.enabled`).checked;
        for (const name of names) {
          const input = field(row, `${cls}.${section}.${name}`);
          input.disabled = !on;
          if (on && input.value === "") input.value = String(DEFAULTS[name]);
        }
      }
    }
  }

  // ---- checks and the schedule ----------------------------------------------------------

  function rangeProblem(value, name) {
    const [low, high] = limits[name];
    if (value === null) return "must be a whole number";
    if (typeof value !== "number" || !Number.isInteger(value)) return "must be a whole number";
    if (value < low || value > high) return `must be between ${low} and ${high}, got ${value}`;
    return null;
  }

  /** Problems the browser can see at once, by field path inside the row. */
  function rowProblems(data) {
    const problems = {};
    if (!data.id) problems.id = "must not be empty";
    if (!data.agent) problems.agent = "must not be empty";
    for (const cls of CLASSES) {
      const policy = data[cls];
      if (policy.retry.enabled) {
        for (const name of ["max_retries", "initial_interval_seconds"]) {
          const problem = rangeProblem(policy.retry[name], name);
          if (problem) problems[`${cls}.retry.${name}`] = problem;
        }
      }
      if (policy.wait_for_reset.enabled) {
        const problem = rangeProblem(policy.wait_for_reset.max_wait_seconds, "max_wait_seconds");
        if (problem) problems[`${cls}.wait_for_reset.max_wait_seconds`] = problem;
      }
    }
    return problems;
  }

  function delays(retry) {
    const out = [];
    for (let n = 0; n < retry.max_retries; n += 1) {
      out.push(Math.min(retry.initial_interval_seconds * 2 ** n, limits.delay_cap_seconds));
    }
    return out;
  }

  /** In the policy package's words (policy/preview.py): "retry 3× after 5 s, 10 s, 20 s;
   *  then skip to codex". */
  function schedule(policy, successor) {
    const steps = [];
    if (policy.wait_for_reset.enabled) {
      const most = Console.duration(policy.wait_for_reset.max_wait_seconds);
      steps.push(`if a trusted reset ≤ ${most} away is reported, wait for it once`);
    }
    if (policy.retry.enabled) {
      const times = delays(policy.retry).map(Console.duration).join(", ");
      steps.push(`retry ${policy.retry.max_retries}× after ${times}`);
    }
    let outcome = "stop for manual recovery";
    if (policy.on_exhausted === "skip") {
      outcome = successor
        ? `skip to ${successor}`
        : "skip; no candidate is left, so the route stops for manual recovery";
    }
    if (!steps.length) return `no retry and no wait: ${outcome}`;
    return `${steps.join("; ")}; then ${outcome}`;
  }

  function showError(row, path, message, source) {
    const target = (row || form).querySelector(`[data-error-for="${path}"]`);
    if (!target) return false;
    target.textContent = message;
    target.dataset.source = source;
    const input = (row || form).querySelector(`[data-field="${path}"], [data-profile-field="${path}"]`);
    if (input) input.setAttribute("aria-invalid", "true");
    return true;
  }

  function clearErrors(source) {
    for (const element of form.querySelectorAll("[data-error-for]")) {
      if (!source || element.dataset.source === source) {
        element.textContent = "";
        delete element.dataset.source;
      }
    }
    for (const input of form.querySelectorAll('[aria-invalid="true"]')) {
      const row = input.closest("[data-candidate]");
      const path = input.dataset.field || input.dataset.profileField;
      const shown = (row || form).querySelector(`[data-error-for="${path}"]`);
      if (!shown || !shown.textContent) input.removeAttribute("aria-invalid");
    }
  }

  /** Everything derived from the values: positions, sections, the schedule, checks. */
  function refresh() {
    renumber();
    clearErrors("browser");
    const all = rows();
    const data = all.map(candidate);
    all.forEach((row, index) => {
      syncSections(row);
      const current = candidate(row);
      const problems = rowProblems(current);
      for (const [path, message] of Object.entries(problems)) {
        const shown = row.querySelector(`[data-error-for="${path}"]`);
        if (shown && shown.dataset.source !== "server") showError(row, path, message, "browser");
      }
      const later = data.slice(index + 1).find((other) => other.enabled);
      const successor = later ? later.id || `candidate ${data.indexOf(later) + 1}` : null;
      const brief = [];
      for (const cls of CLASSES) {
        const target = row.querySelector(`[data-schedule="${cls}"]`);
        const broken = Object.keys(problems).some((path) => path.startsWith(`${cls}.`));
        const text = broken ? "fix the values above to see the schedule"
          : schedule(current[cls], successor);
        target.textContent = `${LABELS[cls]}: ${text}`;
        brief.push(`${cls}: ${broken ? "…" : text.split(";")[0]}`);
      }
      row.querySelector("[data-schedule-brief]").textContent = `(${brief.join(" · ")})`;
    });
  }

  // ---- saving -----------------------------------------------------------------------

  function say(text, error) {
    status.textContent = text;
    status.classList.toggle("error", Boolean(error));
  }

  /** The backend's errors beside their fields: `profile.candidates[1].hard.retry…`. */
  function showProblems(problems) {
    const unplaced = [];
    for (const problem of problems) {
      const path = (problem.field || "").replace(/^profile\.?/, "");
      const match = /^candidates\[(\d+)\]\.(.+)$/.exec(path);
      let placed = false;
      if (match) {
        const row = rows()[Number(match[1])];
        placed = Boolean(row) && showError(row, match[2], problem.message, "server");
      } else if (path === "id" || path === "name" || path === "candidates") {
        placed = showError(null, path, problem.message, "server");
      }
      if (!placed) unplaced.push(`${problem.field || "profile"}: ${problem.message}`);
    }
    return unplaced;
  }

  function stored(saved) {
    form.dataset.profileId = saved.profile_id;
    form.dataset.version = String(saved.version);
    const idInput = form.querySelector('[data-profile-field="id"]');
    idInput.value = saved.profile_id;
    idInput.readOnly = true;
    document.getElementById("editor-title").textContent = `Profile ${saved.profile_id}`;
    document.title = `Profile ${saved.profile_id} · provider-recovery`;
    window.history.replaceState(null, "", `/console/profiles/${encodeURIComponent(saved.profile_id)}`);
    fill(saved.document);
    document.getElementById("saved").hidden = false;
    document.getElementById("saved-version").textContent = `version ${saved.version}`;
    document.getElementById("saved-json").textContent = JSON.stringify(saved.document, null, 2);
    say(`Saved: version ${saved.version}, as stored.`, false);
  }

  async function save(event) {
    event.preventDefault();
    clearErrors("server");
    refresh();
    say("Saving…", false);
    const profileId = form.dataset.profileId;
    const profile = profileDocument();
    const answer = profileId
      ? await Console.api("PUT", `/profiles/${encodeURIComponent(profileId)}`,
        { version: Number(form.dataset.version), profile })
      : await Console.api("POST", "/profiles",
        { id: form.querySelector('[data-profile-field="id"]').value.trim(), profile });
    if (answer.ok) {
      stored(answer.body);
      return;
    }
    const body = answer.body || { message: `the server answered ${answer.status}` };
    const unplaced = showProblems(body.errors || []);
    refresh();
    const more = unplaced.length ? ` ${unplaced.join("; ")}` : "";
    say(`Not saved: ${body.message}.${more}`, true);
  }

  // ---- events -------------------------------------------------------------------------

  list.addEventListener("click", (event) => {
    const button = event.target.closest("button");
    if (!button) return;
    const row = button.closest("[data-candidate]");
    if (button.hasAttribute("data-remove")) {
      row.remove();
    } else if (button.dataset.move) {
      const sibling = button.dataset.move === "-1" ? row.previousElementSibling
        : row.nextElementSibling;
      if (sibling) {
        if (button.dataset.move === "-1") sibling.before(row);
        else sibling.after(row);
      }
    }
    refresh();
  });

  form.addEventListener("input", (event) => {
    const shown = event.target.closest(".field, fieldset, label");
    const row = event.target.closest("[data-candidate]");
    const path = event.target.dataset.field || event.target.dataset.profileField;
    const error = path && (row || form).querySelector(`[data-error-for="${path}"]`);
    if (error && error.dataset.source === "server" && shown) {
      error.textContent = "";
      delete error.dataset.source;
    }
    refresh();
  });
  form.addEventListener("change", refresh);
  form.addEventListener("submit", save);

  document.getElementById("add-candidate").addEventListener("click", () => {
    const row = newRow();
    field(row, "id").value = `candidate-${rows().length}`;
    refresh();
    field(row, "id").focus();
  });

  if (form.dataset.profileId) {
    const saved = document.getElementById("saved-json");
    saved.textContent = JSON.stringify(profileDocument(), null, 2);
  }
  refresh();
})();
