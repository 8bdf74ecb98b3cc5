package testdeps

import (
	"os/exec"
	"testing"
)

func TestRequireFindsPrograms(t *testing.T) {
	want, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	got := Require(t, "sh")
	if len(got) != 1 || got[0] != want {
		t.Fatalf("Require(sh) = %v, want [%s]", got, want)
	}
}

func TestRequireMissingFailsUnderCI(t *testing.T) {
	t.Setenv("CI", "1")
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		Require(ft, "no-such-program-throttlekit")
	}()
	if !ft.failed || ft.skipped {
		t.Fatalf("under CI a missing program must fail the test: failed=%v skipped=%v", ft.failed, ft.skipped)
	}
}

func TestRequireMissingSkipsOutsideCI(t *testing.T) {
	t.Setenv("CI", "")
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		Require(ft, "no-such-program-throttlekit")
	}()
	if ft.failed || !ft.skipped {
		t.Fatalf("outside CI a missing program must skip: failed=%v skipped=%v", ft.failed, ft.skipped)
	}
}

// fakeT records Fatal and Skip instead of stopping the real test; it panics
// to end Require the way runtime.Goexit would.
type fakeT struct {
	testing.TB
	failed, skipped bool
}

func (f *fakeT) Helper()      {}
func (f *fakeT) Name() string { return "fake" }
func (f *fakeT) Fatal(...any) { f.failed = true; panic("fatal") }
func (f *fakeT) Skip(...any)  { f.skipped = true; panic("skip") }
