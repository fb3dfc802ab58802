// llamaindex-writer.cjs — writes a directory into a Chroma collection with
// LlamaIndex.TS itself: @llamaindex/core's SentenceSplitter (its default
// node parser), or its MarkdownNodeParser (one node a section; a section
// loses its header's "#", so most nodes carry no offsets, only their
// PREVIOUS/NEXT relationships), and @llamaindex/chroma's
// ChromaVectorStore. Documents carry file_path and file_name as
// SimpleDirectoryReader sets them — or, with "nopath", no metadata at all
// (documents made from text: only their ids tie the nodes together);
// embeddings are given (no model).
//
//   node llamaindex-writer.cjs NODE_MODULES CHROMA_URL COLLECTION SRC_DIR [sentence|markdown|nopath]
const path = require("node:path");
const fs = require("node:fs");
const [modules, url, collectionName, src, parser = "sentence"] = process.argv.slice(2);
const need = (m) => require(require.resolve(m, { paths: [modules] }));
const { ChromaVectorStore } = need("@llamaindex/chroma");
const { SentenceSplitter, MarkdownNodeParser } = need("@llamaindex/core/node-parser");
const { Document } = need("@llamaindex/core/schema");
const { Settings } = need("@llamaindex/core/global");
const { BaseEmbedding } = need("@llamaindex/core/embeddings");

// a deterministic embedding model (the vector store asks for one)
class FixedEmbedding extends BaseEmbedding {
  async getTextEmbedding() { return [0.1, 0.2, 0.3]; }
}
Settings.embedModel = new FixedEmbedding();

function walk(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? walk(p) : [p];
  });
}

(async () => {
  const meta = (p) => (parser === "nopath" ? {} : { file_path: p, file_name: path.basename(p) });
  const docs = walk(src).sort().map((p) => new Document({ text: fs.readFileSync(p, "utf8"), metadata: meta(p) }));
  const splitter = parser === "markdown" ? new MarkdownNodeParser() : new SentenceSplitter({ chunkSize: 128, chunkOverlap: 20 });
  const nodes = splitter.getNodesFromDocuments(docs);
  for (const n of nodes) n.embedding = [0.1, 0.2, 0.3];
  const store = new ChromaVectorStore({ collectionName, chromaClientParams: { path: url } });
  await store.add(nodes);
  console.log(JSON.stringify({ files: docs.length, nodes: nodes.length }));
})().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
