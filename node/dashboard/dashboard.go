// Package dashboard serves roboNet's web UI on a node's HTTP listener:
// the mesh (members, leader, Waggler roles, trust, quarantine, worker
// pools), instances (filtered lists, and one instance with its DAG drawn as
// SVG and kept live through server-sent events, with buttons to cancel,
// pause, resume and retry it and a form per signal its tasks wait for),
// and workflows with their schedules.
//
// Pages are server-rendered Go templates with a little plain JavaScript and
// CSS, all embedded in the binary. The dashboard reads through the same
// WorkflowService and MeshService a gRPC client uses, called in-process, so
// every node serves it — a follower forwards to the leader what only the
// leader knows — and its errors are the API's.
package dashboard

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/internal/access"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Prefix is where the dashboard is mounted.
const Prefix = "/ui/"

// Config is what the dashboard reads and how it admits users.
type Config struct {
	API  robonetv1.WorkflowServiceServer
	Mesh robonetv1.MeshServiceServer
	// Authorize checks an API token and says whose it is; nil: the API
	// asks for none, and neither does the dashboard. With it, a user signs
	// in with a token, kept in a cookie for the session, and the pages
	// call the API as that token's principal.
	Authorize func(token string) (*access.Principal, bool)
	// Permit reports whether p may call an API method (a full gRPC
	// method name): the pages show only the buttons the signed-in role
	// may press, and a form posted without the role is refused. nil:
	// everything is permitted.
	Permit func(p *access.Principal, fullMethod string) bool
	Logger *zap.Logger
	// Node names the node serving the pages.
	Node string
	// LivePoll is how often the live view of an instance reads it.
	// Default: 300 ms.
	LivePoll time.Duration
	// MaxLive bounds the live views open at once (each reads its instance
	// every LivePoll); more are refused with 503. Default: 64.
	MaxLive int
	// Stopping, when done, ends the live views: the node is stopping.
	Stopping context.Context
}

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// cookieName holds the signed-in user's API token.
const cookieName = "robonet_token"

// callTimeout bounds one page's API calls.
const callTimeout = 15 * time.Second

type server struct {
	cfg   Config
	pages map[string]*template.Template
	live  chan struct{} // a token per open live view
}

// New returns the dashboard's handler, to mount at Prefix.
func New(cfg Config) (http.Handler, error) {
	if cfg.API == nil || cfg.Mesh == nil {
		return nil, errors.New("dashboard: the WorkflowService and the MeshService are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.LivePoll <= 0 {
		cfg.LivePoll = 300 * time.Millisecond
	}
	if cfg.MaxLive <= 0 {
		cfg.MaxLive = 64
	}
	if cfg.Stopping == nil {
		cfg.Stopping = context.Background()
	}
	s := &server{cfg: cfg, pages: map[string]*template.Template{}, live: make(chan struct{}, cfg.MaxLive)}
	for _, page := range []string{"mesh", "instances", "instance", "workflows", "login", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, err
		}
		s.pages[page] = t
	}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix+"static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+Prefix+"login", s.loginPage)
	mux.HandleFunc("POST "+Prefix+"login", s.login)
	mux.HandleFunc("POST "+Prefix+"logout", s.logout)
	mux.Handle("GET "+Prefix+"{$}", s.signedIn(s.meshPage))
	mux.Handle("GET "+Prefix+"instances", s.signedIn(s.instancesPage))
	mux.Handle("GET "+Prefix+"instances/{id}", s.signedIn(s.instancePage))
	mux.Handle("GET "+Prefix+"instances/{id}/live", s.signedIn(s.instanceLive))
	mux.Handle("POST "+Prefix+"instances/{id}/cancel", s.signedIn(s.permitted("CancelInstance", s.cancel)))
	mux.Handle("POST "+Prefix+"instances/{id}/signal", s.signedIn(s.permitted("SignalInstance", s.signal)))
	mux.Handle("POST "+Prefix+"instances/{id}/pause", s.signedIn(s.permitted("PauseInstance", s.pause)))
	mux.Handle("POST "+Prefix+"instances/{id}/resume", s.signedIn(s.permitted("ResumeInstance", s.resume)))
	mux.Handle("POST "+Prefix+"instances/{id}/retry", s.signedIn(s.permitted("RetryInstance", s.retry)))
	mux.Handle("GET "+Prefix+"workflows", s.signedIn(s.workflowsPage))
	return mux, nil
}

// signedIn admits a request that carries a valid token (cookie or bearer
// header) when the API asks for one, and sends a browser to sign in
// otherwise. The request's context carries the token's principal: the
// pages call the API as it.
func (s *server) signedIn(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.authorize(tokenOf(r))
		if !ok {
			if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
				http.Redirect(w, r, Prefix+"login?next="+template.URLQueryEscaper(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "sign in with an API token first ("+Prefix+"login)", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost && !sameOrigin(r) {
			http.Error(w, "cross-site request refused", http.StatusForbidden)
			return
		}
		h(w, r.WithContext(access.NewContext(r.Context(), p)))
	})
}

// may reports whether the signed-in principal may call a method of the
// WorkflowService.
func (s *server) may(r *http.Request, method string) bool {
	if s.cfg.Permit == nil {
		return true
	}
	p, ok := access.FromContext(r.Context())
	return ok && s.cfg.Permit(p, "/"+robonetv1.WorkflowService_ServiceDesc.ServiceName+"/"+method)
}

// permitted refuses a form whose call the signed-in role may not make.
func (s *server) permitted(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.may(r, method) {
			p, _ := access.FromContext(r.Context())
			s.render(w, r, "error", http.StatusForbidden, map[string]any{
				"Error": fmt.Sprintf("%s may not do this (%s): sign in with a token whose role may", p, method), "Code": http.StatusForbidden})
			return
		}
		h(w, r)
	}
}

func tokenOf(r *http.Request) string {
	if c, err := r.Cookie(cookieName); err == nil {
		return c.Value
	}
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return t
	}
	return ""
}

// sameOrigin reports whether a form post comes from a page of this
// dashboard (its Origin, when the browser sends one, is this host).
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	return origin == "" || origin == "http://"+r.Host || origin == "https://"+r.Host
}

func (s *server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, "login", http.StatusOK, map[string]any{"Next": safeNext(r.URL.Query().Get("next"))})
}

func (s *server) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-site request refused", http.StatusForbidden)
		return
	}
	token, next := r.PostFormValue("token"), safeNext(r.PostFormValue("next"))
	if _, ok := s.authorize(token); !ok {
		s.render(w, r, "login", http.StatusUnauthorized, map[string]any{"Next": next, "Error": "That token is not one of the node's API tokens (--api-token-file)."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: token, Path: Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Path: Prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// authorize looks token up; every token is good without Authorize.
func (s *server) authorize(token string) (*access.Principal, bool) {
	if s.cfg.Authorize == nil {
		return access.Anonymous, true
	}
	return s.cfg.Authorize(token)
}

// safeNext keeps a redirect inside the dashboard.
func safeNext(next string) string {
	if len(next) < len(Prefix) || next[:len(Prefix)] != Prefix {
		return Prefix
	}
	return next
}

// render writes a page; a template error is logged and answered 500.
func (s *server) render(w http.ResponseWriter, r *http.Request, page string, code int, data map[string]any) {
	data["Node"], data["Page"], data["Auth"] = s.cfg.Node, page, s.cfg.Authorize != nil
	if p, ok := access.FromContext(r.Context()); ok && s.cfg.Authorize != nil {
		data["Who"] = p.String()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	w.WriteHeader(code)
	if err := s.pages[page].Execute(w, data); err != nil {
		s.cfg.Logger.Warn("dashboard page failed to render", zap.String("page", page), zap.String("path", r.URL.Path), zap.Error(err))
	}
}

// fail shows an API error as a page with the status a user can act on.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusBadGateway
	switch status.Code(err) {
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.InvalidArgument:
		code = http.StatusBadRequest
	case codes.Unavailable:
		code = http.StatusServiceUnavailable
	case codes.FailedPrecondition:
		code = http.StatusConflict
	}
	s.render(w, r, "error", code, map[string]any{"Error": errMessage(err), "Code": code})
}

// ctx bounds a page's API calls by the request and callTimeout.
func ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), callTimeout)
}

// errMessage is an API error's message without the gRPC wrapping.
func errMessage(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}
