package goengine

import (
	"math"
	"math/big"
)

// ONNX Runtime's Pow computes C's pow(double, double) for every pair of
// types but FLOAT ^ FLOAT (powf), and casts the result to the base's type
// (the cast of a NaN or an out-of-range double to an integer being x86's,
// the type's minimum). glibc's pow is correctly rounded in all but the
// hardest cases (an error of at most 0.52 ULP), and Go's math.Pow is not
// (a few ULP): 8 ^ (1/3.) is 2 in ONNX Runtime and 1.9999999999999998 in
// Go, so an INT32 Pow on math.Pow gives 1 where ONNX Runtime gives 2.
// cPow computes the power with about 100 bits (a double-double logarithm
// and exponential), then rounds it once: it differs from glibc's only
// where the exact power lies within glibc's error of halfway between two
// doubles, where glibc rounds it one way or the other (of the INT64
// powers past 2^53 that are exactly halfway, 3^34 among them, it rounds
// about 40% up), and cPow by its own last bits.

// dd is an unevaluated sum hi + lo of two doubles, |lo| <= ulp(hi)/2.
type dd struct{ hi, lo float64 }

// twoSum is a + b exactly.
func twoSum(a, b float64) dd {
	s := a + b
	bb := s - a
	return dd{s, (a - (s - bb)) + (b - bb)}
}

// quickTwoSum is a + b exactly, given |a| >= |b|.
func quickTwoSum(a, b float64) dd {
	s := a + b
	return dd{s, b - (s - a)}
}

// twoProd is a * b exactly.
func twoProd(a, b float64) dd {
	p := a * b
	return dd{p, math.FMA(a, b, -p)}
}

func (a dd) add(b dd) dd {
	s, t := twoSum(a.hi, b.hi), twoSum(a.lo, b.lo)
	s = quickTwoSum(s.hi, s.lo+t.hi)
	return quickTwoSum(s.hi, s.lo+t.lo)
}

func (a dd) mul(b dd) dd {
	p := twoProd(a.hi, b.hi)
	return quickTwoSum(p.hi, p.lo+(a.hi*b.lo+a.lo*b.hi))
}

func (a dd) mulF(b float64) dd {
	p := twoProd(a.hi, b)
	return quickTwoSum(p.hi, p.lo+a.lo*b)
}

func (a dd) div(b dd) dd {
	q1 := a.hi / b.hi
	r := a.add(b.mulF(-q1))
	q2 := r.hi / b.hi
	r = r.add(b.mulF(-q2))
	return quickTwoSum(q1, q2).add(dd{r.hi / b.hi, 0})
}

var (
	// ln2 is ln 2 to 106 bits (TestPowConstants checks it).
	ln2 = dd{0.6931471805599453, 2.3190468138462996e-17}
	// invOdd[k] is 1/(2k+1), the coefficients of atanh's series.
	invOdd = func() []dd {
		c := make([]dd, 24)
		for k := range c {
			c[k] = dd{1, 0}.div(dd{float64(2*k + 1), 0})
		}
		return c
	}()
	// invFact[k] is 1/k!, the coefficients of exp's series.
	invFact = func() []dd {
		c := make([]dd, 11)
		c[0] = dd{1, 0}
		for k := 1; k < len(c); k++ {
			c[k] = c[k-1].div(dd{float64(k), 0})
		}
		return c
	}()
)

// ddLog is ln a for a finite a > 0: e ln 2 + ln m, where a = m 2^e and m
// is within sqrt(2) of 1, and ln m = 2 atanh(s), s = (m-1)/(m+1), |s| <
// 0.172, whose series the 24 terms of invOdd sum past 2^-106.
func ddLog(a float64) dd {
	m, e := math.Frexp(a)
	if m < math.Sqrt2/2 {
		m, e = 2*m, e-1
	}
	s := dd{m - 1, 0}.div(twoSum(m, 1)) // m - 1 is exact
	s2 := s.mul(s)
	sum := invOdd[len(invOdd)-1]
	for k := len(invOdd) - 2; k >= 0; k-- {
		sum = sum.mul(s2).add(invOdd[k])
	}
	l := sum.mul(s)
	return dd{2 * l.hi, 2 * l.lo}.add(ln2.mulF(float64(e)))
}

// ddExp is e^t as m 2^k, for |t| < 750: t = k ln 2 + r, |r| <= ln2/2,
// and e^r = (e^(r/1024))^1024, the inner one by its series to r^10/10!
// (|r/1024| < 3.4e-4), squared 10 times as e^x - 1 (2u + u^2), which keeps
// the small part's bits.
func ddExp(t dd) (dd, int) {
	k := math.Round(t.hi / ln2.hi)
	r := t.add(ln2.mulF(-k))
	r = dd{r.hi / 1024, r.lo / 1024}
	u := invFact[len(invFact)-1]
	for i := len(invFact) - 2; i >= 1; i-- {
		u = u.mul(r).add(invFact[i])
	}
	u = u.mul(r) // e^r - 1
	for range 10 {
		u = dd{2 * u.hi, 2 * u.lo}.add(u.mul(u))
	}
	return dd{1, 0}.add(u), int(k)
}

// cPow is C's pow(x, y), correctly rounded but where the exact power is
// within about 2^-95 of halfway between two doubles, and with C99's (and
// Go's) special cases.
func cPow(x, y float64) float64 {
	switch {
	case y == 0 || x == 1:
		return 1
	case math.IsNaN(x):
		return quiet(x) // glibc's x + y, which is x's NaN on x86
	case math.IsNaN(y):
		return quiet(y)
	case x == 0 || math.IsInf(x, 0) || math.IsInf(y, 0):
		return math.Pow(x, y)
	}
	if r, ok := exactPow(x, y); ok {
		return r
	}
	odd := false
	if x < 0 {
		if y != math.Trunc(y) {
			return defaultNaN
		}
		odd = math.Abs(y) < 1<<53 && int64(y)%2 != 0
		x = -x
	}
	sign := 1.0
	if odd {
		sign = -1
	}
	l := ddLog(x)
	// Past e^710 a double overflows, below e^-746 it rounds to 0; the
	// test on hi alone keeps the products below finite.
	switch th := l.hi * y; {
	case th > 710:
		return math.Copysign(math.Inf(1), sign)
	case th < -746:
		return math.Copysign(0, sign)
	}
	m, k := ddExp(l.mulF(y))
	if r := math.Ldexp(m.hi, k); r == 0 || math.Abs(r) >= 0x1p-1022 || math.IsInf(r, 0) {
		return math.Copysign(r, sign)
	}
	// A subnormal result: hi + lo rounded once, to its fewer bits.
	f := new(big.Float).SetPrec(256).SetFloat64(m.hi)
	f.Add(f, new(big.Float).SetFloat64(m.lo))
	r, _ := f.SetMantExp(f, k).Float64()
	return math.Copysign(r, sign)
}

// defaultNaN is the NaN x86 makes of an invalid operation, which is
// glibc's pow of a negative base and an exponent that is no integer (Go's
// math.NaN has other bits).
var defaultNaN = math.Float64frombits(0xfff8000000000000)

// quiet is the NaN x with its quiet bit set, as x86's arithmetic passes
// a NaN operand on.
func quiet(x float64) float64 {
	return math.Float64frombits(math.Float64bits(x) | 1<<51)
}

// exactPow is x^y when x is an integer of at most 2^53 and y one in [1,
// 64] and each power on the way is below 2^53, exact in a double: the
// common small powers, without the logarithm.
func exactPow(x, y float64) (float64, bool) {
	if y < 1 || y > 64 || y != math.Trunc(y) || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return 0, false
	}
	r := x
	for range int(y) - 1 {
		if r *= x; math.Abs(r) > 1<<53 {
			return 0, false
		}
	}
	return r, true
}

// toInt32 is the C cast of v to int32 on x86: truncated toward zero, and
// the type's minimum when v is NaN or out of range.
func toInt32(v float64) int32 {
	if !(v > math.MinInt32-1 && v < math.MaxInt32+1) {
		return math.MinInt32
	}
	return int32(v)
}

// toInt64 is toInt32 for int64.
func toInt64(v float64) int64 {
	if !(v >= math.MinInt64 && v < math.MaxInt64) { // the constants round to ±2^63
		return math.MinInt64
	}
	return int64(v)
}
