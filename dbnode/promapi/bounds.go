package promapi

import (
	"net/http"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/tessera-tsdb/tessera/limits"
)

// Bounds on a PromQL expression, checked before any parser sees it.
//
// Prometheus' parser and engine cost grows with the square of an
// expression's depth: parser.BinaryExpr.Type (and ParenExpr's and
// UnaryExpr's) asks its operands for their type recursively, and the
// parser's type checks and the engine's evaluation call it at every node,
// so `1 + 1 + ...` of n terms costs n^2/2 calls (0.67 s at 2,000 terms,
// 8 s at 8,000, minutes at 100,000, none of it cancellable: the parser
// takes no context). That cost is upstream's; what is ours is to refuse
// such an expression before parsing it, in time linear in its bytes:
// exprDepth reads only the lexer's tokens.

// exprDepth is the nesting depth of the expression qs as counted on its
// tokens, an upper bound of the depth of the tree the parser builds:
// brackets ( ) add one level (a parenthesis, call or aggregation), a
// range or subquery [ ] one more than the operand it follows, and at one
// bracket level every binary or unary operator adds one, as in a chain of
// one operator, which the parser nests one node per operator (a + b + c
// is 2 deep). Operators of mixed precedence count as if they nested:
// a*b + c*d counts 3 where the tree is 2 deep. The arguments of one call
// (separated by commas) count apart, label matchers in braces not at
// all. A lexing error ends the count: the parser reports it.
func exprDepth(qs string) int {
	type level struct {
		ops   int // operators in the current argument
		child int // the deepest operand in brackets in the current argument
		max   int // the deepest earlier argument
		// last is the depth of the operand just closed, which a range
		// or subquery [ ] that follows it nests one deeper.
		last int
	}
	var (
		stack  = []level{{}}
		braces bool
		it     parser.Item
		lex    = parser.Lex(qs)
	)
	depth := func(l level) int { return max(l.max, l.ops+l.child) }
	for {
		lex.NextItem(&it)
		switch typ := it.Typ; {
		case typ == parser.EOF || typ == parser.ERROR:
			// Brackets left open (an error the parser reports) count too.
			d := depth(stack[len(stack)-1])
			for i := len(stack) - 2; i >= 0; i-- {
				l := stack[i]
				d = max(l.max, l.ops+max(l.child, max(l.last, d)+1))
			}
			return d
		case braces:
			braces = typ != parser.RIGHT_BRACE
		case typ == parser.LEFT_BRACE:
			braces = true
		case typ == parser.LEFT_PAREN || typ == parser.LEFT_BRACKET:
			stack = append(stack, level{})
		case typ == parser.RIGHT_PAREN || typ == parser.RIGHT_BRACKET:
			if len(stack) == 1 {
				continue // unbalanced: the parser's error
			}
			d := depth(stack[len(stack)-1])
			stack = stack[:len(stack)-1]
			up := &stack[len(stack)-1]
			if typ == parser.RIGHT_BRACKET {
				up.last = max(up.last, d) + 1
			} else {
				up.last = d + 1
			}
			up.child = max(up.child, up.last)
		case typ == parser.COMMA:
			top := &stack[len(stack)-1]
			*top = level{max: depth(*top)}
		case typ.IsOperator():
			stack[len(stack)-1].ops++
			stack[len(stack)-1].last = 0
		case typ == parser.IDENTIFIER || typ == parser.METRIC_IDENTIFIER || typ == parser.NUMBER || typ == parser.STRING:
			stack[len(stack)-1].last = 0 // a new operand
		}
	}
}

// checkExpression refuses a query expression longer than
// Options.MaxExpressionBytes or deeper than Options.MaxExpressionDepth
// (exprDepth), with a 400 naming the limit, counted in
// tessera_limits_refused.
func (a *API) checkExpression(qs string) *apiError {
	if m := a.opts.MaxExpressionBytes; m > 0 && len(qs) > m {
		return queryError(a.opts.Limits.Refuse(limits.QueryExpressionBytes, http.StatusBadRequest,
			"query expression of %d bytes exceeds %s=%d", len(qs), limits.QueryExpressionBytes, m))
	}
	if m := a.opts.MaxExpressionDepth; m > 0 {
		if d := exprDepth(qs); d > m {
			return queryError(a.opts.Limits.Refuse(limits.QueryExpressionDepth, http.StatusBadRequest,
				"query expression nests %d deep (operators and brackets; a + b + ... of n terms is n-1), exceeds %s=%d",
				d, limits.QueryExpressionDepth, m))
		}
	}
	return nil
}
