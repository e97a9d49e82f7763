package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

// metricMetadata answers GET /api/v1/metadata as Prometheus does, from
// the metadata remote write brought to this node (metadata.Store):
// parameters metric, limit and limit_per_metric; data maps each metric
// name to its distinct {type, help, unit} entries.
func (a *API) metricMetadata(w http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r, "limit", -1)
	if err != nil {
		apiError(w, http.StatusBadRequest, "bad_data", err)
		return
	}
	limitPerMetric, err := intParam(r, "limit_per_metric", -1)
	if err != nil {
		apiError(w, http.StatusBadRequest, "bad_data", err)
		return
	}
	metric := r.FormValue("metric")
	if b, err := a.getBackend(); err == nil {
		if ab, ok := b.(AuxBackend); ok {
			m, warns, err := ab.QueryMetadata(r.Context(), metric, limit, limitPerMetric)
			if err != nil {
				apiError(w, http.StatusServiceUnavailable, "unavailable", err)
				return
			}
			apiSuccessWarn(w, m, warns)
			return
		}
	}
	apiSuccess(w, a.meta.Query(metric, limit, limitPerMetric))
}

func intParam(r *http.Request, name string, def int) (int, error) {
	s := r.FormValue(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, errors.New(name + " must be a number")
	}
	return v, nil
}

// apiSuccess and apiError write Prometheus' API envelope.
func apiSuccess(w http.ResponseWriter, data any) { apiSuccessWarn(w, data, nil) }

func apiSuccessWarn(w http.ResponseWriter, data any, warnings []string) {
	b, err := json.Marshal(struct {
		Status   string   `json:"status"`
		Data     any      `json:"data"`
		Warnings []string `json:"warnings,omitempty"`
	}{"success", data, warnings})
	if err != nil {
		apiError(w, http.StatusInternalServerError, "internal", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func apiError(w http.ResponseWriter, code int, typ string, err error) {
	b, _ := json.Marshal(struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}{"error", typ, err.Error()})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
