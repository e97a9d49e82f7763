package repair

import (
	"encoding/json"
	"net/http"
)

// StatusPath is where a node serves its repair status.
const StatusPath = "/api/v1/status/repair"

// StatusHandler serves status() as JSON (the Status struct; durations in
// nanoseconds, times RFC 3339).
func StatusHandler(status func() Status) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(status())
	})
}
