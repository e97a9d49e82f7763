package promapi

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// The appenders below write results byte for byte as Prometheus' JSON
// codec (web/api/v1/json_codec.go, util/jsonutil) does, without its
// jsoniter dependency, and without building an intermediate value tree:
// a range query over thousands of series renders straight into one buffer.

// appendTimestamp writes a millisecond timestamp as seconds, the way
// jsonutil.MarshalTimestamp does: integer part, then the milliseconds as
// three digits when not zero (1500 -> 1.500).
func appendTimestamp(dst []byte, t int64) []byte {
	if t < 0 {
		dst = append(dst, '-')
		t = -t
	}
	dst = strconv.AppendInt(dst, t/1000, 10)
	if frac := t % 1000; frac != 0 {
		dst = append(dst, '.')
		if frac < 100 {
			dst = append(dst, '0')
		}
		if frac < 10 {
			dst = append(dst, '0')
		}
		dst = strconv.AppendInt(dst, frac, 10)
	}
	return dst
}

// appendFloat writes a sample value as a JSON string, the way
// jsonutil.MarshalFloat does: shortest decimal, exponent form below 1e-6 and
// from 1e21 on, and "+Inf", "-Inf", "NaN" for the special values.
func appendFloat(dst []byte, f float64) []byte {
	dst = append(dst, '"')
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string with encoding/json's escaping
// (HTML-safe, U+2028 and U+2029 escaped, invalid UTF-8 replaced).
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendLabels writes a label set as an object in label order.
func appendLabels(dst []byte, ls labels.Labels) []byte {
	dst = append(dst, '{')
	first := true
	ls.Range(func(l labels.Label) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendString(dst, l.Name)
		dst = append(dst, ':')
		dst = appendString(dst, l.Value)
	})
	return append(dst, '}')
}

func appendPoint(dst []byte, t int64, f float64) []byte {
	dst = append(dst, '[')
	dst = appendTimestamp(dst, t)
	dst = append(dst, ',')
	dst = appendFloat(dst, f)
	return append(dst, ']')
}

// valueSize estimates, a little high for typical values, how many bytes
// appendValue writes for v: a range query over thousands of series renders
// megabytes, which a buffer grown by doubling would allocate about twice
// and copy as often. Histograms count one point each; their buffer grows.
func valueSize(v parser.Value) int {
	const point = 36 // [1700000000.123,"12345.678901234567"], full-precision values
	labelsSize := func(ls labels.Labels) int {
		n := 2
		ls.Range(func(l labels.Label) { n += len(l.Name) + len(l.Value) + 6 })
		return n
	}
	n := 0
	switch v := v.(type) {
	case promql.Matrix:
		for _, s := range v {
			n += 24 + labelsSize(s.Metric) + point*(len(s.Floats)+len(s.Histograms))
		}
	case promql.Vector:
		for _, s := range v {
			n += 24 + labelsSize(s.Metric) + point
		}
	}
	return n
}

// appendValue writes a query result. Scalars and strings go through their
// own MarshalJSON, as in Prometheus; so do series and samples holding
// native histograms (rare next to floats: the hand-written path is for
// floats).
func appendValue(dst []byte, v parser.Value) ([]byte, error) {
	switch v := v.(type) {
	case promql.Matrix:
		dst = append(dst, '[')
		for i, s := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			if len(s.Histograms) > 0 {
				b, err := json.Marshal(s)
				if err != nil {
					return dst, err
				}
				dst = append(dst, b...)
				continue
			}
			dst = append(dst, `{"metric":`...)
			dst = appendLabels(dst, s.Metric)
			if len(s.Floats) > 0 {
				dst = append(dst, `,"values":[`...)
				for j, p := range s.Floats {
					if j > 0 {
						dst = append(dst, ',')
					}
					dst = appendPoint(dst, p.T, p.F)
				}
				dst = append(dst, ']')
			}
			dst = append(dst, '}')
		}
		return append(dst, ']'), nil
	case promql.Vector:
		dst = append(dst, '[')
		for i, s := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			if s.H != nil {
				b, err := json.Marshal(s)
				if err != nil {
					return dst, err
				}
				dst = append(dst, b...)
				continue
			}
			dst = append(dst, `{"metric":`...)
			dst = appendLabels(dst, s.Metric)
			dst = append(dst, `,"value":`...)
			dst = appendPoint(dst, s.T, s.F)
			dst = append(dst, '}')
		}
		return append(dst, ']'), nil
	case promql.Scalar, promql.String:
		b, err := json.Marshal(v)
		return append(dst, b...), err
	}
	return dst, fmt.Errorf("unexpected result type %T", v)
}
