package bench

import "github.com/tessera-tsdb/tessera/internal/clientsec"

// Security are the credentials and TLS files for a secured node; the CLI's
// other commands share them (internal/clientsec).
type Security = clientsec.Security
