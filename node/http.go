package node

import (
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/robonet/robonet/node/dashboard"
)

// httpHandler serves the operational endpoints:
//
//	/healthz  200 while the process serves HTTP at all (liveness)
//	/readyz   200 once the node started, knows the engine's leader and
//	          (on servers) its store answers, until it begins to stop;
//	          503 saying why otherwise (readiness: route API traffic here)
//
//	/metrics  Prometheus series (see nodeMetrics)
//	/ui/      the dashboard (package dashboard); / redirects there
func (n *Node) httpHandler() (http.Handler, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", n.metrics.handler())
	cfg := dashboard.Config{API: auditedAPI{WorkflowServiceServer: scopedAPI{n.api}, trail: n.audit}, Mesh: n.meshAPI, Logger: n.log.Named("dashboard"), Node: n.cfg.Name, Stopping: n.stopping}
	if n.tokens != nil {
		cfg.Authorize, cfg.Permit = n.tokens.lookup, permits
	}
	ui, err := dashboard.New(cfg)
	if err != nil {
		return nil, err
	}
	mux.Handle(dashboard.Prefix, dashboardPeer(ui))
	mux.Handle("GET /{$}", http.RedirectHandler(dashboard.Prefix, http.StatusFound))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if why := n.notReady(r.Context()); why != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %s\n", why)
			return
		}
		l := n.Leadership()
		fmt.Fprintf(w, "ready (leader %s, term %d)%s\n", l.Leader, l.Term, n.storeReadiness())
	})
	if n.cfg.EnableDebug {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile) // at most the write timeout (30 s)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux, nil
}

// storeReadiness says, on a server on Postgres, which database host it
// writes to and whether commits reach a synchronous standby.
func (n *Node) storeReadiness() string {
	if n.pg == nil {
		return ""
	}
	c, r := n.pg.ConnStats(), n.pg.ReplicationStats()
	out := "; writes to " + c.Host
	switch {
	case !r.Known:
	case r.WritesWait():
		out += ", which has no synchronous standby: commits wait until one catches up"
	case r.SyncRequired && r.SyncStandbys > 0:
		out += fmt.Sprintf(", with %d synchronous standby(s)", r.SyncStandbys)
	case !r.SyncRequired:
		out += ", which does not replicate synchronously"
	}
	return out
}

// readyProbeTimeout bounds the store check of one /readyz.
const readyProbeTimeout = 2 * time.Second

// notReady says why the node should not get API traffic, or "".
func (n *Node) notReady(ctx context.Context) string {
	if !n.ready.Load() {
		return "starting or stopping"
	}
	if n.Leadership().Leader == "" {
		return "no engine leader known yet (an election is due, or this node cannot reach the servers)"
	}
	if n.store != nil {
		ctx, cancel := context.WithTimeout(ctx, readyProbeTimeout)
		defer cancel()
		if err := n.store.Ping(ctx); err != nil {
			return fmt.Sprintf("the %s store does not answer: %v", n.storeName(), err)
		}
	}
	return ""
}
