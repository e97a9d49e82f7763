package encoding

import "math"

// maxScale is the most fractional decimal digits integer mode handles:
// enough for node_exporter's centiseconds (cpu), milliseconds (disk io time)
// and millidegrees (hwmon), and for strconv-parsed decimals like load
// averages.
const maxScale = 6

// pow10f[s] is 10^s, exact in float64.
var pow10f = [maxScale + 1]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6}

// pow10u[s] is 10^s as an integer, used to carry integer state to a larger
// scale with wrapping multiplication.
var pow10u = [maxScale + 1]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6}

// fromInt is the value integer mode stores as n at the given scale.
// Dividing by an exact power of ten is correctly rounded, so a decimal that
// was itself produced as n/10^s (or parsed from text) comes back bit for bit.
func fromInt(n int64, scale uint8) float64 {
	if scale == 0 {
		return float64(n)
	}
	return float64(n) / pow10f[scale]
}

// toInt returns n with fromInt(n, scale) bit-identical to v, if there is one.
// -0, NaN and ±Inf never qualify.
func toInt(v float64, scale uint8) (int64, bool) {
	m := v
	if scale != 0 {
		m = v * pow10f[scale]
	}
	if !(m > -(1<<63) && m < 1<<63) { // also false for NaN
		return 0, false
	}
	// Any rounding will do: the check below is exact.
	n := int64(math.RoundToEven(m))
	return n, math.Float64bits(fromInt(n, scale)) == math.Float64bits(v)
}

// findScale returns the smallest scale at which v is an integer in the sense
// of toInt. It rejects arbitrary floats with one multiplication: a decimal
// with at most maxScale digits times 10^maxScale lands within a few ulps of
// an integer, a random float almost never does.
func findScale(v float64) (int64, uint8, bool) {
	if n, ok := toInt(v, 0); ok {
		return n, 0, true
	}
	m := v * pow10f[maxScale]
	am := math.Abs(m)
	if !(am < 1<<62) {
		return 0, 0, false
	}
	r := math.RoundToEven(m)
	if math.Abs(m-r) > am*0x1p-50 {
		return 0, 0, false
	}
	n, s := int64(r), uint8(maxScale)
	for s > 0 && n%10 == 0 {
		n /= 10
		s--
	}
	if math.Float64bits(fromInt(n, s)) == math.Float64bits(v) {
		return n, s, true
	}
	if am < 1<<50 {
		// m was accurate to well under 0.5, so n/10^s is the only
		// candidate; larger scales denote the same rational.
		return 0, 0, false
	}
	for s++; s <= maxScale; s++ {
		if n, ok := toInt(v, s); ok {
			return n, s, true
		}
	}
	return 0, 0, false
}
