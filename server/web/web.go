package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
)

//go:embed assets page.html
var files embed.FS

// Options describe the server the page is served by.
type Options struct {
	// DevMode: the server runs without authentication. The page shows a
	// banner saying so from its first paint (it also learns it from
	// GET /v1/session).
	DevMode bool
	// Model names the model the server's runs use, shown in the page's
	// header, for example "demo (offline demo model)". Empty: not shown.
	Model string
	// Version is the server's version, shown in the page's footer.
	Version string
}

// ContentSecurityPolicy is sent with every response of [Handler]: the page
// loads nothing but its own script, style and images, runs no inline
// script or style, and cannot be framed.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// asset is one embedded file, ready to serve.
type asset struct {
	name   string // as in assets/, e.g. "app.js"
	hashed string // e.g. "app.3f2a9c1b07d4e5f6.js"
	ctype  string
	etag   string
	body   []byte
	gz     []byte // nil when gzip does not make it smaller
}

type assetSet struct {
	byName map[string]*asset // plain and hashed names
	urls   map[string]string // plain name -> /assets/<hashed>
}

var loadAssets = sync.OnceValue(func() *assetSet {
	set := &assetSet{byName: map[string]*asset{}, urls: map[string]string{}}
	err := fs.WalkDir(files, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "assets/")
		sum := sha256.Sum256(body)
		h := hex.EncodeToString(sum[:8])
		ext := path.Ext(name)
		a := &asset{name: name, hashed: strings.TrimSuffix(name, ext) + "." + h + ext,
			ctype: mime.TypeByExtension(ext), etag: `"` + h + `"`, body: body}
		if a.ctype == "" {
			a.ctype = "application/octet-stream"
		}
		if gz := gzipped(body); len(gz) < len(body)*9/10 {
			a.gz = gz
		}
		set.byName[a.name], set.byName[a.hashed] = a, a
		set.urls[a.name] = "/assets/" + a.hashed
		return nil
	})
	if err != nil {
		panic("web: reading the embedded assets: " + err.Error())
	}
	return set
})

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

var pageTemplate = template.Must(template.ParseFS(files, "page.html"))

// pageData is what page.html is rendered with.
type pageData struct {
	Options
	CSS, JS, Icon string
	// LearnJS and LearnCSS are "approve, and allow calls like this",
	// a module of its own beside the page's script.
	LearnJS, LearnCSS string
	// EditsJS shows a coding agent's Edit and MultiEdit calls as diffs.
	EditsJS string
}

type handler struct {
	assets   *assetSet
	page     []byte
	pageETag string
}

// Handler serves the reviewer page: GET / is the page (an html/template
// rendered once from opts), /assets/... its script, style and icon. Asset
// URLs in the page carry a hash of the content and are cached for a year;
// the page itself and the unhashed asset names are revalidated with
// ETags. Every response carries [ContentSecurityPolicy],
// X-Content-Type-Options: nosniff and Referrer-Policy: same-origin. Other
// paths are 404, methods other than GET and HEAD 405.
//
// The page talks to the JSON API under /v1 of the same origin (see
// server/API.md): mount Handler beside it, at "/".
func Handler(opts Options) http.Handler {
	set := loadAssets()
	var buf bytes.Buffer
	data := pageData{Options: opts, CSS: set.urls["app.css"], JS: set.urls["app.js"], Icon: set.urls["icon.svg"],
		LearnJS: set.urls["learn.js"], LearnCSS: set.urls["learn.css"], EditsJS: set.urls["edits.js"]}
	if err := pageTemplate.Execute(&buf, data); err != nil {
		panic("web: rendering the page: " + err.Error()) // the template is embedded: a bug, not an input
	}
	sum := sha256.Sum256(buf.Bytes())
	return &handler{assets: set, page: buf.Bytes(), pageETag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")

	var a *asset
	switch {
	case r.URL.Path == "/":
	case strings.HasPrefix(r.URL.Path, "/assets/"):
		if a = h.assets.byName[strings.TrimPrefix(r.URL.Path, "/assets/")]; a == nil {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
	default:
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if a == nil {
		hd.Set("Cache-Control", "no-cache")
		serve(w, r, "text/html; charset=utf-8", h.pageETag, h.page, nil)
		return
	}
	if path.Base(r.URL.Path) == a.hashed {
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hd.Set("Cache-Control", "no-cache")
	}
	serve(w, r, a.ctype, a.etag, a.body, a.gz)
}

// serve writes body (or gz, gzip-encoded, when the client takes it),
// answering a matching If-None-Match with 304.
func serve(w http.ResponseWriter, r *http.Request, ctype, etag string, body, gz []byte) {
	hd := w.Header()
	if gz != nil {
		hd.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			body = gz
			etag = strings.TrimSuffix(etag, `"`) + `-gz"`
			hd.Set("Content-Encoding", "gzip")
		}
	}
	hd.Set("ETag", etag)
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Type", ctype)
	hd.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			q = strings.ReplaceAll(strings.TrimSpace(q), " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}
