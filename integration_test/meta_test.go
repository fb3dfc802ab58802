package integration_test

import (
	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
)

type chromaMeta = v2.DocumentMetadata

func newMeta(m map[string]any) chromaMeta {
	md, err := v2.NewDocumentMetadataFromMap(m)
	if err != nil {
		panic(err)
	}
	return md
}
