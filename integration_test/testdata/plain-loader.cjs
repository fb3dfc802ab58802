// plain-loader.cjs — a hand-written loader, as a RAG pipeline might have
// one, using the official chromadb JavaScript client: each file under
// SRC_DIR is cut into pieces of 250 characters (code points), stored with
// metadata {path: <relative path>, offset: <start, in code points>} and
// {groups: "team"} for files under internal/; ids are random UUIDs;
// embeddings are given (no model).
//
//   node plain-loader.cjs NODE_MODULES URL COLLECTION SRC_DIR
"use strict";
const { createRequire } = require("node:module");
const crypto = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");

function walk(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? walk(p) : [p];
  });
}

async function main() {
  const [modules, url, name, src] = process.argv.slice(2);
  const { ChromaClient } = createRequire(path.join(modules, "noop.js"))("chromadb");
  const u = new URL(url);
  const client = new ChromaClient({ host: u.hostname, port: Number(u.port), ssl: u.protocol === "https:" });
  const coll = await client.getOrCreateCollection({ name, embeddingFunction: null });
  const ids = [], documents = [], metadatas = [], embeddings = [];
  for (const file of walk(src)) {
    const rel = path.relative(src, file);
    const chars = Array.from(fs.readFileSync(file, "utf8"));
    for (let off = 0; off < chars.length; off += 250) {
      ids.push(crypto.randomUUID());
      documents.push(chars.slice(off, off + 250).join(""));
      const md = { path: rel, offset: off };
      if (rel.startsWith("internal/")) md.groups = "team";
      metadatas.push(md);
      embeddings.push([0.5, 0.25, 0.125]);
    }
  }
  for (let i = 0; i < ids.length; i += 100) {
    await coll.add({ ids: ids.slice(i, i + 100), documents: documents.slice(i, i + 100),
      metadatas: metadatas.slice(i, i + 100), embeddings: embeddings.slice(i, i + 100) });
  }
  console.log(JSON.stringify({ records: ids.length }));
}

main().catch((e) => {
  process.stderr.write(`plain-loader: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
