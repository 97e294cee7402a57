// A reference receiver for provider-recovery's webhook dispatcher, with Node's standard
// library only (node docs/webhook_receiver.mjs). It verifies each request's signature,
// refuses a tampered body or a stale timestamp with 401, answers a redelivery of an attempt
// it already took (same Idempotency-Key) with 200 without launching it again, and prints
// one JSON line per accepted attempt on stdout, where an orchestrator would launch the turn.
//
// Environment: WEBHOOK_SECRET (the runtime's RECOVERY_WEBHOOK_SECRET), PORT (default 8787,
// 0 for any free port), HOST (default 127.0.0.1), MAX_SKEW_S (default 300).
// It prints `listening <port>` on stderr once it accepts connections.
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";

const secret = process.env.WEBHOOK_SECRET;
if (!secret) {
  console.error("WEBHOOK_SECRET is not set");
  process.exit(2);
}
const maxSkewS = Number(process.env.MAX_SKEW_S ?? "300");
const maxBodyBytes = 64 * 1024;
const taken = new Set(); // idempotency keys already launched (a real receiver persists them)

// The signature is "v1=" + hex(HMAC-SHA256(secret, `${timestamp}.${body}`)).
function verified(timestamp, body, signature) {
  if (!/^\d{1,12}$/.test(timestamp ?? "") || typeof signature !== "string") return false;
  const skew = Math.abs(Date.now() / 1000 - Number(timestamp));
  if (!(skew <= maxSkewS)) return false;
  const expected = "v1=" + createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest("hex");
  const given = Buffer.from(signature);
  const wanted = Buffer.from(expected);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

function answer(response, status, text) {
  response.writeHead(status, { "content-type": "text/plain" });
  response.end(text + "\n");
}

const server = createServer((request, response) => {
  if (request.method !== "POST") return answer(response, 405, "POST only");
  const chunks = [];
  let size = 0;
  request.on("data", (chunk) => {
    size += chunk.length;
    if (size > maxBodyBytes) {
      answer(response, 413, "body too large");
      request.destroy();
    } else chunks.push(chunk);
  });
  request.on("end", () => {
    if (size > maxBodyBytes) return;
    const body = Buffer.concat(chunks);
    const timestamp = request.headers["x-recovery-timestamp"];
    if (!verified(timestamp, body, request.headers["x-recovery-signature"])) {
      return answer(response, 401, "bad signature or stale timestamp");
    }
    const key = request.headers["idempotency-key"];
    if (taken.has(key)) return answer(response, 200, "already taken");
    let attempt;
    try {
      attempt = JSON.parse(body.toString("utf8"));
    } catch {
      return answer(response, 400, "not JSON");
    }
    taken.add(key);
    process.stdout.write(JSON.stringify({ key, route: attempt.route_id, candidate: attempt.candidate }) + "\n");
    answer(response, 200, "taken");
  });
});

server.listen(Number(process.env.PORT ?? "8787"), process.env.HOST ?? "127.0.0.1", () => {
  console.error(`listening ${server.address().port}`);
});
