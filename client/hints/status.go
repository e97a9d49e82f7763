package hints

import (
	"encoding/json"
	"net/http"
)

// StatusHandler serves the store's state as JSON: whether hinted handoff
// is on and, per target, the hints waiting (bytes, records, age). A nil
// store answers {"enabled": false}.
func StatusHandler(s *Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		out := struct {
			Enabled bool     `json:"enabled"`
			Targets []Status `json:"targets"`
		}{Enabled: s != nil, Targets: []Status{}}
		if s != nil {
			out.Targets = s.Status()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}
