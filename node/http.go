package node

import (
	"fmt"
	"net/http"
	"net/http/pprof"
)

// httpHandler serves the operational endpoints:
//
//	/healthz  200 while the process serves HTTP at all (liveness)
//	/readyz   200 once the node started and until it begins to stop,
//	          503 otherwise (readiness: route API traffic here)
//
// /metrics arrives with the metrics issue.
func (n *Node) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !n.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready")
			return
		}
		if l := n.Leadership(); l.Leader != "" {
			fmt.Fprintf(w, "ready (leader %s, term %d)\n", l.Leader, l.Term)
			return
		}
		fmt.Fprintln(w, "ready (no leader elected yet)")
	})
	if n.cfg.EnableDebug {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile) // at most the write timeout (30 s)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}
