// bench/http_api.py's `http_node` client: an orchestrator that is not Python, reporting
// failures over the HTTP API with Node's standard `http` module and one keep-alive
// connection (an Agent of one socket), as a Node orchestrator would.
//
//   node http_node_client.mjs PORT TOKEN BODY_JSON
//
// Speaks the bench's line protocol: prints "ready", then for each route id read on stdin
// sends `POST /routes/{id}/failure` with BODY_JSON (the same body the Python client
// sends) and prints `wall_s cpu_s state`: its own clock and CPU time from the call to the
// parsed answer.
import http from "node:http";
import readline from "node:readline";

const [port, token, body] = process.argv.slice(2);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const headers = {
  Authorization: `Bearer ${token}`,
  "Content-Type": "application/json",
  "Content-Length": Buffer.byteLength(body),
};

function report(routeId) {
  return new Promise((resolve, reject) => {
    const request = http.request(
      { host: "127.0.0.1", port, path: `/routes/${routeId}/failure`, method: "POST", headers, agent },
      (response) => {
        const chunks = [];
        response.on("data", (chunk) => chunks.push(chunk));
        response.on("end", () => {
          const answer = JSON.parse(Buffer.concat(chunks).toString("utf8"));
          if (response.statusCode !== 200) {
            reject(new Error(`${routeId}: ${response.statusCode} ${JSON.stringify(answer)}`));
          } else {
            resolve(answer.state);
          }
        });
      },
    );
    request.on("error", reject);
    request.end(body);
  });
}

const lines = readline.createInterface({ input: process.stdin });
process.stdout.write("ready\n");
for await (const line of lines) {
  const wall = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  const state = await report(line.trim());
  const spent = process.cpuUsage(cpu);
  const seconds = Number(process.hrtime.bigint() - wall) / 1e9;
  process.stdout.write(`${seconds} ${(spent.user + spent.system) / 1e6} ${state}\n`);
}
agent.destroy();
