// An orchestrator with no Python at all: it receives the runtime's retries by webhook and
// drives its route over the HTTP API, with nothing but Node's standard library
// (tests/actors/api/test_api_webhook.py runs it against a real `recovery up`).
//
//   WEBHOOK_SECRET=… ROUTE=session-1 node orchestrate_webhook.mjs
//
// It listens on a free loopback port and prints `listening <port>` on stderr (the port is
// `up`'s RECOVERY_WEBHOOK_URL), then reads one JSON line on stdin: {"api_url", "token"}.
// start -> a failure the policy retries in 1 s -> the retry arrives by webhook; the first
// delivery is answered 503 with Retry-After: 1 (the agent pool is full), the redelivery
// (same Idempotency-Key) 200 -> the route is `retrying` -> the turn's success is reported
// with the generation and attempt the webhook named. Every webhook request is verified
// (HMAC-SHA256 of `<timestamp>.<body>`, a fresh timestamp) as docs/webhook_receiver.mjs
// does. Prints one JSON line of what it saw; exits 1 on the first answer that is not what
// the contract says.
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, request as httpRequest } from "node:http";
import { createInterface } from "node:readline";

const secret = process.env.WEBHOOK_SECRET;
const route = process.env.ROUTE;
const WAIT_MS = 90_000;
const MAX_SKEW_S = 300;

function fail(what) {
  console.error(what);
  process.exit(1);
}

function verified(timestamp, body, signature) {
  if (!/^\d{1,12}$/.test(timestamp ?? "") || typeof signature !== "string") return false;
  if (!(Math.abs(Date.now() / 1000 - Number(timestamp)) <= MAX_SKEW_S)) return false;
  const expected = "v1=" + createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest("hex");
  const given = Buffer.from(signature);
  const wanted = Buffer.from(expected);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

// Every webhook request as it arrived: {key, verified, body, status answered, at}.
const hooks = [];
let hookArrived = () => {};
const server = createServer((incoming, response) => {
  const chunks = [];
  incoming.on("data", (chunk) => chunks.push(chunk));
  incoming.on("end", () => {
    const body = Buffer.concat(chunks);
    const ok = verified(incoming.headers["x-recovery-timestamp"], body,
                        incoming.headers["x-recovery-signature"]);
    const first = hooks.length === 0;
    const status = !ok ? 401 : first ? 503 : 200;
    const headers = { "content-type": "text/plain" };
    if (status === 503) headers["retry-after"] = "1";
    response.writeHead(status, headers);
    response.end(status === 200 ? "taken\n" : "not now\n");
    hooks.push({ key: incoming.headers["idempotency-key"], verified: ok, status,
                 body: ok ? JSON.parse(body.toString("utf8")) : null, at: Date.now() });
    hookArrived();
  });
});

function hooksAnswered(count) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => fail(`only ${hooks.length} webhook requests in ${WAIT_MS} ms`), WAIT_MS);
    const check = () => {
      if (hooks.length >= count) {
        clearTimeout(timer);
        resolve(hooks.slice(0, count));
      }
    };
    hookArrived = check;
    check();
  });
}

function call(api, method, path, body, key) {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers = { Authorization: `Bearer ${api.token}`, Accept: "application/json" };
  if (payload !== undefined) {
    headers["Content-Type"] = "application/json";
    headers["Content-Length"] = Buffer.byteLength(payload);
  }
  if (key !== undefined) headers["Idempotency-Key"] = key;
  const base = new URL(api.api_url);
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest(
      { host: base.hostname, port: base.port, path, method, headers },
      (answer) => {
        const chunks = [];
        answer.on("data", (chunk) => chunks.push(chunk));
        answer.on("end", () => resolve({ status: answer.statusCode,
                                         body: JSON.parse(Buffer.concat(chunks).toString("utf8")) }));
      },
    );
    outgoing.on("error", reject);
    if (payload !== undefined) outgoing.write(payload);
    outgoing.end();
  });
}

function expect(what, answer, check) {
  if (answer.status !== 200 || !check(answer.body)) {
    fail(`${what}: unexpected ${answer.status} ${JSON.stringify(answer.body)}`);
  }
  return answer.body;
}

const retryEverySecond = {
  retry: { enabled: true, max_retries: 3, initial_interval_seconds: 1 },
  wait_for_reset: { enabled: false, max_wait_seconds: 0 },
  on_exhausted: "stop",
};
const profile = {
  version: 1,
  candidates: [{ id: "claude", agent: "claude-acp", provider: "anthropic", model: "claude-sonnet",
                 account: `${route}-account`, transient: retryEverySecond, hard: retryEverySecond }],
};
const turn = {
  execution_id: "exec-1", prompt_generation: 1, output_observed: false,
  thoughts_observed: false, tool_call_started: false, tool_call_completed: false,
  partial_utility_result: false, ambiguous_delivery: false,
};
const overloaded = {
  kind: "http", http_status: 529, provider: "anthropic", agent: "claude-acp",
  body: JSON.stringify({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } }),
};

async function drive(api) {
  const path = `/routes/${route}`;
  const seen = {};
  seen.start = expect("start", await call(api, "POST", `${path}/start`, {
    profile, caller: "node-orchestrator", invocation_id: "turn-1",
  }, `${route}-start`), (s) => s.state === "active" && s.next_step === "run");
  seen.failure = expect("failure", await call(api, "POST", `${path}/failure`, {
    generation: seen.start.generation, evidence: overloaded, turn,
    caller: "node-orchestrator", invocation_id: "turn-1",
  }, `${route}-fail-1`), (s) => s.state === "retry_wait" && s.next_step === "wait");
  const [refused, taken] = await hooksAnswered(2);
  seen.hooks = [refused, taken];
  if (!refused.verified || !taken.verified) fail(`a webhook did not verify: ${JSON.stringify(hooks)}`);
  const attempt = taken.body;
  seen.retrying = expect("read", await call(api, "GET", path),
    (s) => s.state === "retrying" && s.next_step === "wait"
           && s.attempt_ordinal === attempt.ordinal && s.generation === attempt.generation);
  seen.success = expect("success", await call(api, "POST", `${path}/success`,
    { generation: attempt.generation }, `${route}-success-${attempt.ordinal}`),
    (s) => s.state === "active" && s.next_step === "done");
  seen.history = (await call(api, "GET", `${path}/history`)).body;
  return seen;
}

server.listen(0, "127.0.0.1", () => {
  console.error(`listening ${server.address().port}`);
  const lines = createInterface({ input: process.stdin });
  lines.once("line", async (line) => {
    lines.close();
    const seen = await drive(JSON.parse(line));
    console.log(JSON.stringify(seen));
    server.close();
    process.exit(0);
  });
});
