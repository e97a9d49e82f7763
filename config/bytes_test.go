package config

import (
	"strings"
	"testing"
)

// Byte sizes take Prometheus' units as well as plain integers; before,
// `maxBytesPerTarget: 512MiB` failed with yaml's "cannot unmarshal !!str".
func TestConfigByteSizesTakeUnits(t *testing.T) {
	c, err := Parse(strings.NewReader(`
http:
  maxBodyBytes: 64MiB
hints:
  maxBytesPerTarget: "512MiB"
  replayBytesPerSecond: 8MB
gc:
  headroom: 268435456
commitlog:
  maxPendingBytes: 1GiB
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		got, want int64
	}{
		{"http.maxBodyBytes", c.HTTP.MaxBodyBytes, 64 << 20},
		{"hints.maxBytesPerTarget", c.Hints.MaxBytesPerTarget, 512 << 20},
		{"hints.replayBytesPerSecond", c.Hints.ReplayBytesPerSecond, 8 << 20},
		{"gc.headroom", c.GC.Headroom, 256 << 20},
		{"commitlog.maxPendingBytes", c.CommitLog.MaxPendingBytes, 1 << 30},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

func TestConfigByteSizeErrorsNameTheField(t *testing.T) {
	_, err := Parse(strings.NewReader("hints:\n  maxBytesPerTarget: 512 apples\n"))
	if err == nil || !strings.Contains(err.Error(), "hints.maxBytesPerTarget") || !strings.Contains(err.Error(), "MiB") {
		t.Fatalf("err = %v, want one naming hints.maxBytesPerTarget and the units", err)
	}
}

// An unknown key is named by its path, with the field it most likely
// meant; yaml.v3 said "field retension not found in type config.Namespace".
func TestConfigUnknownKeysNamedByPath(t *testing.T) {
	_, err := Parse(strings.NewReader(`
namespaces:
  - name: default
    retension: 48h
http:
  listn: 127.0.0.1:7201
  zzzzzzzz: 1
`))
	if err == nil {
		t.Fatal("no error for unknown keys")
	}
	for _, want := range []string{
		`namespaces[0].retension: unknown field (line 4); did you mean "retention"?`,
		`http.listn: unknown field (line 6); did you mean "listen"?`,
		`http.zzzzzzzz: unknown field (line 7)`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "zzzzzzzz: unknown field (line 7); did you mean") {
		t.Errorf("error %q suggests a field for a key like none", err)
	}
	if strings.Contains(err.Error(), "config.Namespace") {
		t.Errorf("error %q names a Go type", err)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"retension", "retention", 1}, {"kitten", "sitting", 3}} {
		if got := editDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}
