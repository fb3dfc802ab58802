package backend

import (
	"errors"
	"fmt"
	"testing"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/content"
	"github.com/chromafs/chromafs/lazy"
)

// TestClassify: one classifier puts every backend's errors in the engine's
// terms, and keeps the original error in the chain.
func TestClassify(t *testing.T) {
	tests := []struct {
		err  error
		want error // nil: none of the engine's sentinels
	}{
		{fmt.Errorf("get: %w", chroma.ErrBusy), content.ErrBusy},
		{fmt.Errorf("get: %w", chroma.ErrUnreachable), content.ErrTemporary},
		{fmt.Errorf("get: %w", chroma.ErrServer), content.ErrTemporary},
		{fmt.Errorf("page: %w", chroma.ErrBadPage), content.ErrBadPage},
		{fmt.Errorf("get: %w", chroma.ErrUnauthorized), nil},
		{fmt.Errorf("range: %w", lazy.ErrBusy), content.ErrBusy},
		{fmt.Errorf("range: %w", lazy.ErrTemporary), content.ErrTemporary},
		{fmt.Errorf("range: %w", lazy.ErrNotAllowed), nil},
	}
	sentinels := []error{content.ErrBusy, content.ErrTemporary, content.ErrBadPage}
	for _, tt := range tests {
		got := Classify(tt.err)
		if !errors.Is(got, tt.err) {
			t.Errorf("Classify(%v) = %v: lost the original error", tt.err, got)
		}
		for _, s := range sentinels {
			if is := errors.Is(got, s); is != (s == tt.want) {
				t.Errorf("Classify(%v) = %v: errors.Is(%v) = %t", tt.err, got, s, is)
			}
		}
	}
	if Classify(nil) != nil {
		t.Error("Classify(nil) is not nil")
	}
}
