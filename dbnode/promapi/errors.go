package promapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/prometheus/promql"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/limits"
)

// errorType is the "errorType" of Prometheus' JSON envelope.
type errorType string

// The error types of Prometheus' web/api/v1.
const (
	errorTimeout     errorType = "timeout"
	errorCanceled    errorType = "canceled"
	errorExec        errorType = "execution"
	errorBadData     errorType = "bad_data"
	errorInternal    errorType = "internal"
	errorUnavailable errorType = "unavailable"
	errorNotFound    errorType = "not_found"
	errorCostLimit   errorType = "cost_limit"
)

// statusClientClosedConnection is nginx's 499, which Prometheus answers
// for a canceled query.
const statusClientClosedConnection = 499

// status is the HTTP status Prometheus answers with for each error type.
// ("unavailable" has no entry in Prometheus' table and falls to 500.)
func (t errorType) status() int {
	switch t {
	case errorBadData:
		return http.StatusBadRequest
	case errorExec, errorCostLimit:
		return http.StatusUnprocessableEntity
	case errorCanceled:
		return statusClientClosedConnection
	case errorTimeout:
		return http.StatusServiceUnavailable
	case errorNotFound:
		return http.StatusNotFound
	default:
		return http.StatusInternalServerError
	}
}

type apiError struct {
	typ errorType
	err error
}

func (e *apiError) Error() string { return fmt.Sprintf("%s: %s", e.typ, e.err) }

func badData(err error) *apiError { return &apiError{errorBadData, err} }

// invalidParam is Prometheus' error for a parameter that does not parse.
func invalidParam(err error, name string) *apiError {
	return badData(fmt.Errorf("invalid parameter %q: %w", name, err))
}

// queryError classifies an error of query evaluation or of the storage
// under it as Prometheus does, with two additions: a deadline hit inside
// storage is a timeout (Prometheus reports it as "execution"), and an
// unknown namespace is the caller's mistake, not the query's.
func queryError(err error) *apiError {
	var (
		canceled promql.ErrQueryCanceled
		timeout  promql.ErrQueryTimeout
		series   promql.ErrTooManySeries
		read     promql.ErrTooManySamplesRead
		storage  promql.ErrStorage
		limit    *limits.Error
	)
	switch {
	case errors.As(err, &limit):
		if limit.Status == http.StatusBadRequest {
			return &apiError{errorBadData, err}
		}
		return &apiError{errorExec, err}
	case errors.As(err, &canceled):
		return &apiError{errorCanceled, err}
	case errors.As(err, &timeout):
		return &apiError{errorTimeout, err}
	case errors.As(err, &series), errors.As(err, &read):
		return &apiError{errorCostLimit, err}
	case errors.Is(err, tstorage.ErrUnknownNamespace):
		return &apiError{errorBadData, err}
	case errors.As(err, &storage):
		return &apiError{errorInternal, err}
	case errors.Is(err, context.Canceled):
		return &apiError{errorCanceled, err}
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{errorTimeout, err}
	}
	return &apiError{errorExec, err}
}

// constructionError classifies an error of building a query: a bad
// expression is bad data; running out of time before it starts is not.
func constructionError(err error) *apiError {
	var timeout promql.ErrQueryTimeout
	var canceled promql.ErrQueryCanceled
	if errors.As(err, &timeout) || errors.As(err, &canceled) {
		return queryError(err)
	}
	return invalidParam(err, "query")
}
