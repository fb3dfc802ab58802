package testenv

import (
	"testing"
)

// recorder is a testing.TB that records how Missing ended it.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Fatalf(f string, a ...any) { r.fatal = f }
func (r *recorder) Skipf(f string, a ...any)  { r.skip = f }

func TestMissing(t *testing.T) {
	for _, ci := range []string{"true", ""} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv("CI", ci)
			r := &recorder{TB: t}
			Missing(r, "no %s", "thing")
			if ci == "true" && (r.fatal == "" || r.skip != "") {
				t.Errorf("under CI=true Missing must fail, not skip: fatal %q skip %q", r.fatal, r.skip)
			}
			if ci == "" && (r.skip == "" || r.fatal != "") {
				t.Errorf("outside CI Missing must skip, not fail: fatal %q skip %q", r.fatal, r.skip)
			}
			r = &recorder{TB: t}
			Require(r, true, "present")
			if r.fatal != "" || r.skip != "" {
				t.Errorf("Require with ok=true ended the test: %+v", r)
			}
		})
	}
}
