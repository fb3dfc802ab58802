// langchain-writer.cjs — writes a directory into a Chroma collection with
// LangChain.js itself: @langchain/textsplitters' RecursiveCharacterTextSplitter
// (chunkSize 400, chunkOverlap 100, as configured by a user) and
// @langchain/community's Chroma vector store, with @langchain/core's
// deterministic FakeEmbeddings. Each file becomes a Document whose metadata
// is {source: <path>}, as LangChain's TextLoader makes it.
//
//   node langchain-writer.cjs NODE_MODULES CHROMA_URL COLLECTION SRC_DIR
const path = require("node:path");
const fs = require("node:fs");
const [modules, url, collectionName, src] = process.argv.slice(2);
const need = (m) => require(require.resolve(m, { paths: [modules] }));
const { RecursiveCharacterTextSplitter } = need("@langchain/textsplitters");
const { Chroma } = need("@langchain/community/vectorstores/chroma");
const { Document } = need("@langchain/core/documents");
const { FakeEmbeddings } = need("@langchain/core/utils/testing");

function walk(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? walk(p) : [p];
  });
}

(async () => {
  const docs = walk(src).sort().map((p) => new Document({ pageContent: fs.readFileSync(p, "utf8"), metadata: { source: p } }));
  const splitter = new RecursiveCharacterTextSplitter({ chunkSize: 400, chunkOverlap: 100 });
  const chunks = await splitter.splitDocuments(docs);
  await Chroma.fromDocuments(chunks, new FakeEmbeddings(), { collectionName, url });
  console.log(JSON.stringify({ files: docs.length, chunks: chunks.length }));
})().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
