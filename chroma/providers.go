package chroma

// The embedding functions every command knows, registered by name with
// chroma-go: chromafs-ingest writes with them, and the mounts embed
// queries with them. openai is any OpenAI-compatible endpoint (OpenAI,
// TEI, vLLM, llama.cpp, Ollama's /v1) through its api_base.
import (
	_ "github.com/amikos-tech/chroma-go/pkg/embeddings/ollama" // registers "ollama"
	_ "github.com/amikos-tech/chroma-go/pkg/embeddings/openai" // registers "openai"
)
