package web_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/server/web"
)

func get(t *testing.T, h http.Handler, path string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func checkSecurityHeaders(t *testing.T, res *http.Response, what string) {
	t.Helper()
	want := map[string]string{
		"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "same-origin",
	}
	for k, v := range want {
		if got := res.Header.Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got, v)
		}
	}
}

var assetRef = regexp.MustCompile(`(?:src|href)="(/assets/[^"]+)"`)

func TestPage(t *testing.T) {
	h := web.Handler(web.Options{Model: `demo <b>"x"</b>`, Version: "v1.2.3"})
	res := get(t, h, "/")
	if res.StatusCode != 200 {
		t.Fatalf("GET / = %d", res.StatusCode)
	}
	checkSecurityHeaders(t, res, "page")
	if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	page := body(t, res)
	// html/template escapes the options.
	if strings.Contains(page, "<b>") || !strings.Contains(page, "model: demo &lt;b&gt;&#34;x&#34;&lt;/b&gt;") {
		t.Errorf("the model is not escaped in the page:\n%s", page)
	}
	if !strings.Contains(page, "tollgate v1.2.3") {
		t.Error("the version is not in the footer")
	}
	// No inline script or style: the CSP would refuse them.
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<style`),
		regexp.MustCompile(`\sstyle=`),
		regexp.MustCompile(`\son[a-z]+=`),
		regexp.MustCompile(`(?:src|href)="(?:https?:)?//`),
	} {
		if m := bad.FindString(page); m != "" {
			t.Errorf("the page has %q, which the CSP refuses or which leaves the origin", m)
		}
	}
	for _, tag := range regexp.MustCompile(`<script[^>]*>[^<]*</script>`).FindAllString(page, -1) {
		if !regexp.MustCompile(`^<script type="module" src="/assets/[^"]+"></script>$`).MatchString(tag) {
			t.Errorf("script tag %q: only the page's own script file, no inline code", tag)
		}
	}
	if n := strings.Count(page, "<script"); n != 3 {
		t.Errorf("%d script tags, want 3: the page's, learn.js and edits.js", n)
	}
	refs := assetRef.FindAllStringSubmatch(page, -1)
	if len(refs) != 6 {
		t.Fatalf("asset references = %v, want the script, the style, the icon, learn.js and learn.css, and edits.js", refs)
	}
	if !strings.Contains(page, `id="devbanner" class="devbanner" role="alert" hidden`) {
		t.Error("the dev banner shows outside dev mode")
	}
	dev := body(t, get(t, web.Handler(web.Options{DevMode: true}), "/"))
	if !strings.Contains(dev, "dev mode: no authentication") || strings.Contains(dev, `class="devbanner" role="alert" hidden`) {
		t.Error("dev mode does not show its banner")
	}
	if strings.Contains(dev, `id="model" class="chip model">`) {
		t.Error("an empty model is shown")
	}
}

func TestAssets(t *testing.T) {
	h := web.Handler(web.Options{})
	page := body(t, get(t, h, "/"))
	for _, m := range assetRef.FindAllStringSubmatch(page, -1) {
		url := m[1]
		res := get(t, h, url)
		if res.StatusCode != 200 {
			t.Fatalf("GET %s = %d", url, res.StatusCode)
		}
		checkSecurityHeaders(t, res, url)
		if cc := res.Header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
			t.Errorf("%s: Cache-Control = %q, want a year, immutable", url, cc)
		}
		etag := res.Header.Get("ETag")
		plain := body(t, res)
		if etag == "" || len(plain) == 0 {
			t.Fatalf("%s: ETag %q, %d bytes", url, etag, len(plain))
		}
		if res := get(t, h, url, "If-None-Match", etag); res.StatusCode != http.StatusNotModified {
			t.Errorf("%s with If-None-Match: %d, want 304", url, res.StatusCode)
		}
		// The unhashed name is served too, but revalidated.
		name := regexp.MustCompile(`\.[0-9a-f]{16}\.`).ReplaceAllString(url, ".")
		if res := get(t, h, name); res.StatusCode != 200 || res.Header.Get("Cache-Control") != "no-cache" || res.Header.Get("ETag") != etag {
			t.Errorf("%s: %d, Cache-Control %q, ETag %q", name, res.StatusCode, res.Header.Get("Cache-Control"), res.Header.Get("ETag"))
		}
		gz := get(t, h, url, "Accept-Encoding", "br, gzip")
		if gz.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(gz.Body)
			if err != nil {
				t.Fatal(err)
			}
			unz, _ := io.ReadAll(zr)
			if !bytes.Equal(unz, []byte(plain)) {
				t.Errorf("%s: the gzip body differs", url)
			}
		}
		switch {
		case strings.HasSuffix(url, ".js"):
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
				t.Errorf("%s: Content-Type %q", url, ct)
			}
			if len(plain) > 68<<10 {
				t.Errorf("the script is %d bytes: keep it under 68 KiB", len(plain))
			}
			// Data reaches the page as text only.
			for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "localStorage", "sessionStorage", "javascript:"} {
				if strings.Contains(plain, bad) {
					t.Errorf("the script uses %s", bad)
				}
			}
		case strings.HasSuffix(url, ".css"):
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/css") {
				t.Errorf("%s: Content-Type %q", url, ct)
			}
			if strings.Contains(plain, "@import") || strings.Contains(plain, "url(http") {
				t.Error("the style sheet loads from elsewhere")
			}
		}
	}
}

func TestOtherPaths(t *testing.T) {
	h := web.Handler(web.Options{})
	for _, p := range []string{"/index.html", "/assets/", "/assets/nope.js", "/assets/../page.html", "/favicon.ico"} {
		res := get(t, h, p)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, res.StatusCode)
		}
		checkSecurityHeaders(t, res, p)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("x")))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST / = %d, Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/", nil))
	if rec.Code != 200 || rec.Body.Len() != 0 {
		t.Errorf("HEAD / = %d with %d bytes", rec.Code, rec.Body.Len())
	}
}

// The page is mounted at "/" beside the JSON API; server.Config.Page
// takes it as it is.
func ExampleHandler() {
	page := web.Handler(web.Options{Model: "demo (offline demo model)", Version: "v0.1.0"})

	rec := httptest.NewRecorder()
	page.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	fmt.Println(rec.Header().Get("X-Content-Type-Options"), rec.Header().Get("Referrer-Policy"))
	fmt.Println(strings.Contains(rec.Body.String(), "model: demo (offline demo model)"))
	// Output:
	// 200 text/html; charset=utf-8
	// nosniff same-origin
	// true
}
