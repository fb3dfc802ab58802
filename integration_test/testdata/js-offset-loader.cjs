// js-offset-loader.cjs — a hand-made loader on the official chromadb
// JavaScript client, as a RAG pipeline might have one: each file under
// SRC_DIR is cut into chunks of 800 characters with JavaScript string
// slicing (so its characters are UTF-16 code units: a character outside
// the BMP counts 2), stored with metadata {source: <relative path>,
// chunk: <index>, offset: <start, a JavaScript string index>}; ids are
// random UUIDs; embeddings are given (no model). A cut that would fall
// between the two halves of a surrogate pair moves one unit back (half a
// character is no text).
//
//   node js-offset-loader.cjs NODE_MODULES URL COLLECTION SRC_DIR
"use strict";
const { createRequire } = require("node:module");
const crypto = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");

const SIZE = 800;

function walk(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? walk(p) : [p];
  });
}

function isHighSurrogate(code) {
  return code >= 0xd800 && code <= 0xdbff;
}

async function main() {
  const [modules, url, name, src] = process.argv.slice(2);
  const { ChromaClient } = createRequire(path.join(modules, "noop.js"))("chromadb");
  const u = new URL(url);
  const client = new ChromaClient({ host: u.hostname, port: Number(u.port), ssl: u.protocol === "https:" });
  const coll = await client.getOrCreateCollection({ name, embeddingFunction: null });
  const ids = [], documents = [], metadatas = [], embeddings = [];
  for (const file of walk(src)) {
    const text = fs.readFileSync(file, "utf8");
    let chunk = 0;
    for (let off = 0; off < text.length; ) {
      let end = Math.min(off + SIZE, text.length);
      if (end < text.length && isHighSurrogate(text.charCodeAt(end - 1))) end--;
      ids.push(crypto.randomUUID());
      documents.push(text.slice(off, end));
      metadatas.push({ source: path.relative(src, file), chunk, offset: off });
      embeddings.push([0.5, 0.25, 0.125]);
      chunk++;
      off = end;
    }
  }
  for (let i = 0; i < ids.length; i += 100) {
    await coll.add({ ids: ids.slice(i, i + 100), documents: documents.slice(i, i + 100),
      metadatas: metadatas.slice(i, i + 100), embeddings: embeddings.slice(i, i + 100) });
  }
  console.log(JSON.stringify({ records: ids.length }));
}

main().catch((e) => {
  process.stderr.write(`js-offset-loader: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
