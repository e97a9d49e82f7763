// Package zapslog sends the zap logs of libraries we embed (etcd's server
// and client) to the node's slog logger, so a node prints one log format:
// key=value lines, no JSON lines, no stack traces.
//
// Levels are mapped down by a Policy: etcd logs routine events (every
// start, every shutdown) at info and even error, which next to our own
// logs would cry wolf; a Policy says what level each entry deserves.
package zapslog

import (
	"context"
	"log/slog"
	"sort"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Policy maps a zap entry and its fields to the slog level it is logged
// at. It may lower an entry's level, never raise it above zap's own
// (debug, info, warn, error and above): entries the handler would drop at
// that level are dropped before the policy sees them.
type Policy func(e zapcore.Entry, fields map[string]any) slog.Level

// Demote is the default policy: zap's debug and info become slog debug
// (the library's progress is not ours to report), warn and above keep
// their level.
func Demote(e zapcore.Entry, _ map[string]any) slog.Level {
	switch {
	case e.Level < zapcore.WarnLevel:
		return slog.LevelDebug
	case e.Level == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// New returns a zap logger whose entries go to log, with the attributes
// attrs (e.g. "component", "etcd") on every line, at the level policy
// gives them. A nil policy is Demote.
func New(log *slog.Logger, policy Policy, attrs ...any) *zap.Logger {
	if policy == nil {
		policy = Demote
	}
	return zap.New(&core{log: log.With(attrs...), policy: policy})
}

// core is a zapcore.Core writing to a slog.Logger. Its fields are kept as
// zap fields and encoded per entry, since the policy needs them.
type core struct {
	log    *slog.Logger
	policy Policy
	fields []zapcore.Field
}

// Enabled drops early what the handler would drop even at the entry's own
// level; the policy can only lower it further, checked again in Write.
func (c *core) Enabled(l zapcore.Level) bool {
	return c.log.Enabled(context.Background(), natural(l))
}

// natural is zap's level as the slog level of the same name.
func natural(l zapcore.Level) slog.Level {
	switch {
	case l < zapcore.InfoLevel:
		return slog.LevelDebug
	case l < zapcore.WarnLevel:
		return slog.LevelInfo
	case l < zapcore.ErrorLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (c *core) With(fields []zapcore.Field) zapcore.Core {
	return &core{log: c.log, policy: c.policy, fields: append(append([]zapcore.Field(nil), c.fields...), fields...)}
}

func (c *core) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.Enabled(e.Level) {
		return ce
	}
	return ce.AddCore(e, c)
}

func (c *core) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	level := min(c.policy(e, enc.Fields), natural(e.Level))
	ctx := context.Background()
	if !c.log.Enabled(ctx, level) {
		return nil
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := make([]slog.Attr, 0, len(keys)+2)
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	if e.Caller.Defined {
		attrs = append(attrs, slog.String("caller", e.Caller.TrimmedPath()))
	}
	// e.Stack (zap's stack trace on errors) is dropped on purpose: a
	// library's internal frames tell an operator nothing, and they break
	// the one-line-per-event format.
	c.log.LogAttrs(ctx, level, e.Message, attrs...)
	return nil
}

func (c *core) Sync() error { return nil }
