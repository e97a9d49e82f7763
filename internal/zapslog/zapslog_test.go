package zapslog

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestLinesGoThroughSlog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// Stack traces on, as etcd's own logger config has them.
	z := New(log, nil, "component", "etcd").WithOptions(zap.AddStacktrace(zapcore.ErrorLevel), zap.AddCaller())
	z.Info("routine progress", zap.String("member", "m1"))   // demoted to debug: dropped
	z.Warn("slow fsync", zap.Duration("took", 1500_000_000)) // kept at warn
	z.With(zap.String("local", "a")).Error("lost quorum", zap.Error(errors.New("boom")))
	out := buf.String()
	require.NotContains(t, out, "routine progress")
	require.Contains(t, out, `level=WARN msg="slow fsync" component=etcd took=1.5s`)
	require.Contains(t, out, `level=ERROR msg="lost quorum" component=etcd error=boom local=a caller=zapslog/`)
	require.NotContains(t, out, "{")
	require.NotContains(t, out, "goroutine")
	require.NotContains(t, out, "\t", "no stack trace")
	require.Equal(t, 2, strings.Count(out, "\n"))
}

func TestPolicyLowersNeverRaises(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	policy := func(e zapcore.Entry, f map[string]any) slog.Level {
		if f["error"] == "server closed" {
			return slog.LevelDebug
		}
		return slog.LevelError // asks to raise everything
	}
	z := New(log, policy)
	z.Error("serving failed", zap.Error(errors.New("server closed")))
	z.Info("started")
	out := buf.String()
	require.Contains(t, out, `level=DEBUG msg="serving failed" error="server closed"`)
	require.Contains(t, out, `level=INFO msg=started`)
}
