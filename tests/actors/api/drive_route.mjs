// An orchestrator that is not Python: drives one route end to end over the HTTP API with
// nothing but Node's standard `http` module (tests/actors/api/test_api_up.py runs it).
//
//   API_URL=http://127.0.0.1:8484 API_TOKEN=… ROUTE=session-1 node drive_route.mjs
//
// start -> report a failure whose evidence carries a Retry-After header -> next_step is
// "wait" -> retry-now (the operator's action) -> report success (next_step "done"); the
// failure report is then sent again with the same Idempotency-Key: it answers the first
// outcome and changes nothing. Prints one JSON line of what it saw; exits 1 on the first
// answer that is not what the contract says.
import http from "node:http";

const base = new URL(process.env.API_URL);
const token = process.env.API_TOKEN;
const route = process.env.ROUTE;

function call(method, path, body, key) {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers = { Authorization: `Bearer ${token}`, Accept: "application/json" };
  if (payload !== undefined) {
    headers["Content-Type"] = "application/json";
    headers["Content-Length"] = Buffer.byteLength(payload);
  }
  if (key !== undefined) headers["Idempotency-Key"] = key;
  return new Promise((resolve, reject) => {
    const request = http.request(
      { host: base.hostname, port: base.port, path, method, headers },
      (response) => {
        const chunks = [];
        response.on("data", (chunk) => chunks.push(chunk));
        response.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          resolve({ status: response.statusCode, body: JSON.parse(text) });
        });
      },
    );
    request.on("error", reject);
    if (payload !== undefined) request.write(payload);
    request.end();
  });
}

function expect(what, answer, status, check) {
  if (answer.status !== status || !check(answer.body)) {
    console.error(`${what}: unexpected ${answer.status} ${JSON.stringify(answer.body)}`);
    process.exit(1);
  }
  return answer.body;
}

const turn = {
  execution_id: "exec-1", prompt_generation: 1, output_observed: false,
  thoughts_observed: false, tool_call_started: false, tool_call_completed: false,
  partial_utility_result: false, ambiguous_delivery: false,
};
const overloaded = {
  kind: "http", http_status: 529, provider: "anthropic", agent: "claude-acp",
  headers: { "Retry-After": "30" },
  body: JSON.stringify({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } }),
};
const path = `/routes/${route}`;
const seen = {};

const started = expect("start", await call("POST", `${path}/start`, {
  // An account of its own: no other route's failures open its circuits.
  profile: { kind: "concrete", id: "claude", agent: "claude-acp", provider: "anthropic",
             account: `${route}-account` },
  caller: "node-orchestrator", invocation_id: "turn-1",
}, `${route}-start`), 200, (s) => s.state === "active" && s.next_step === "run");
seen.start = started;

const report = {
  generation: started.generation, evidence: overloaded, turn,
  caller: "node-orchestrator", invocation_id: "turn-1",
};
const failed = expect("failure", await call("POST", `${path}/failure`, report, `${route}-fail-1`),
  200, (s) => s.next_step === "wait" && s.deadline !== null);
seen.failure = failed;

const acted = expect("retry-now", await call("POST", `${path}/actions/retry-now`,
  { generation: failed.generation }, `${route}-retry-now`), 200,
  (s) => s.state === "retrying" && s.next_step === "wait");
seen.retry_now = acted;

const done = expect("success", await call("POST", `${path}/success`,
  { generation: acted.generation }, `${route}-success`), 200,
  (s) => s.state === "active" && s.next_step === "done");
seen.success = done;

const before = (await call("GET", path)).body;
const historyBefore = (await call("GET", `${path}/history`)).body;
const replayed = expect("replay", await call("POST", `${path}/failure`, report, `${route}-fail-1`),
  200, (s) => JSON.stringify(s) === JSON.stringify(failed));
seen.replay = replayed;
seen.after_replay = (await call("GET", path)).body;
seen.history_after_replay = (await call("GET", `${path}/history`)).body;
if (JSON.stringify(seen.after_replay) !== JSON.stringify(before)
    || JSON.stringify(seen.history_after_replay) !== JSON.stringify(historyBefore)) {
  console.error("the replayed report changed the route");
  process.exit(1);
}
console.log(JSON.stringify(seen));
