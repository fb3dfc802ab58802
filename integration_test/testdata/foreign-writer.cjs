// foreign-writer.cjs — another tool writing into a Chroma collection: the
// official chromadb JavaScript client, as a RAG pipeline would use it. The
// integration tests use it to seed collections with records chromafs did not
// write, and to read them back for comparison.
//
//   node foreign-writer.cjs NODE_MODULES URL COLLECTION add  < records.json
//   node foreign-writer.cjs NODE_MODULES URL COLLECTION get  ID...  > records.json
//
// records.json: [{"id", "document", "metadata", "embedding"}, ...]. The
// collection is created when missing; embeddings are given explicitly, so
// no embedding model is loaded.
"use strict";
const { createRequire } = require("node:module");
const path = require("node:path");

async function main() {
  const [modules, url, name, verb, ...ids] = process.argv.slice(2);
  const { ChromaClient } = createRequire(path.join(modules, "noop.js"))("chromadb");
  const u = new URL(url);
  const client = new ChromaClient({ host: u.hostname, port: Number(u.port), ssl: u.protocol === "https:" });
  const coll = await client.getOrCreateCollection({ name, embeddingFunction: null });
  if (verb === "add") {
    const recs = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
    await coll.add({
      ids: recs.map((r) => r.id),
      documents: recs.map((r) => r.document),
      metadatas: recs.map((r) => r.metadata),
      embeddings: recs.map((r) => r.embedding),
    });
    return;
  }
  if (verb === "get") {
    const res = await coll.get({ ids, include: ["documents", "metadatas", "embeddings"] });
    const out = res.ids.map((id, i) => ({
      id, document: res.documents[i], metadata: res.metadatas[i],
      embedding: Array.from(res.embeddings[i] ?? []),
    }));
    out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    process.stdout.write(JSON.stringify(out));
    return;
  }
  throw new Error(`unknown verb ${verb}: want add or get`);
}

main().catch((e) => {
  process.stderr.write(`foreign-writer: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
