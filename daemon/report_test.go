package daemon

import (
	"testing"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/tree"
)

// The API names the report where the tree puts it (api stays free of the
// tree package; the daemon sees both).
func TestReportPathAgrees(t *testing.T) {
	if api.ReportPath != tree.ReportPath {
		t.Errorf("api.ReportPath %q, tree.ReportPath %q", api.ReportPath, tree.ReportPath)
	}
}
