package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// What a server sends that is not the API's answer (a proxy's HTML page,
// with escape sequences in it) is shown as one line of plain text: the
// page's title or first line, clipped, controls shown as ⟨U+XXXX⟩, never
// sent to the terminal.
func TestQuestionsServerTextIsShownSafely(t *testing.T) {
	t.Setenv("TOLLGATE_SERVER", "")
	t.Setenv("TOLLGATE_TOKEN", "")
	long := strings.Repeat("x", 5000)
	for _, c := range []struct {
		name, contentType, body string
		status                  int
		want                    string
	}{
		{"html", "text/html", "<html>\n<head><title>502 Bad Gateway\x1b[2J\x1b]0;owned\x07</title></head>\n<body><h1>502</h1></body></html>\n", 502,
			"answered 502 Bad Gateway: 502 Bad Gateway⟨U+001B⟩[2J⟨U+001B⟩]0;owned⟨U+0007⟩ (is it a tollgate serve?)"},
		{"html without a title", "text/html", "<html><body>\n\n<p>upstream \x1b[31mdown</p>\n<p>second line</p></body></html>", 503,
			"answered 503 Service Unavailable: upstream ⟨U+001B⟩[31mdown (is it a tollgate serve?)"},
		{"text", "text/plain", "\n  no tollgate here\x9b1m\nsecond line\n", 404,
			"answered 404 Not Found: no tollgate here⟨0x9B⟩1m (is it a tollgate serve?)"},
		{"long", "text/plain", long, 500, "answered 500 Internal Server Error: " + strings.Repeat("x", 200) + "… (is it a tollgate serve?)"},
		{"empty", "text/plain", "", 502, "answered 502 Bad Gateway (is it a tollgate serve?)"},
		{"the API's error", "application/json", `{"error": {"code": "forbidden", "message": "not you\u001b[2J"}}`, 403,
			"refused: not you⟨U+001B⟩[2J"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", c.contentType)
				w.WriteHeader(c.status)
				fmt.Fprint(w, c.body)
			}))
			defer ts.Close()
			withPassword := strings.Replace(ts.URL, "http://", "http://me:s3cret@", 1)
			shown := strings.Replace(ts.URL, "http://", "http://me:xxxxx@", 1)
			code, _, errOut := runCLI(t, "", "questions", "list", "--server", withPassword)
			if code != 1 || !strings.Contains(errOut, "the server at "+shown+" ") || !strings.HasSuffix(errOut, c.want+"\n") {
				t.Errorf("exit %d, stderr %q\nwant the server at %s ... %s", code, errOut, shown, c.want)
			}
			if strings.ContainsAny(errOut, "\x1b\x07") || !utf8.ValidString(errOut) || strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "s3cret") {
				t.Errorf("stderr %q: want one line of valid text, no control, no password", errOut)
			}
			if len(errOut) > 400 {
				t.Errorf("stderr is %d bytes long: %q", len(errOut), errOut)
			}
		})
	}
}

// A --server URL with a password shows it in no message.
func TestQuestionsServerPasswordNeverShown(t *testing.T) {
	t.Setenv("TOLLGATE_SERVER", "")
	ts := httptest.NewServer(nil)
	down := ts.URL
	ts.Close()
	for _, server := range []string{
		strings.Replace(down, "http://", "http://me:s3cret@", 1),
		strings.Replace(down, "http://", "http://me:s3cr@t@", 1),
		strings.Replace(down, "http://", "ftp://me:s3cret@", 1),
	} {
		for _, cmd := range [][]string{{"questions", "list"}, {"threads", "show", "t1"}, {"audit"}, {"questions", "answer", "t1", "q", "approve"}} {
			code, _, errOut := runCLI(t, "", append(cmd, "--server", server)...)
			if code == 0 || strings.Contains(errOut, "s3cr") || !strings.Contains(errOut, "me:xxxxx@") {
				t.Errorf("%v --server %s: exit %d, %q: want an error naming the server without its password", cmd, server, code, errOut)
			}
		}
	}
}

// dirState is what a write would change in a directory: each file's name,
// size, time and content.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]string{}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		state[e.Name()] = fmt.Sprintf("%d bytes, %v, %x", fi.Size(), fi.ModTime().UnixNano(), sha256.Sum256(b))
	}
	return state
}

// The commands that read a store open it read-only: they work on a file
// and directory the user may only read, and write nothing there, not even
// a -wal or -shm file. (As root, whom chmod does not stop, what is checked
// is that nothing is written.) Answering and aborting need write access,
// and say so.
func TestStoreReadOnlyForReadingCommands(t *testing.T) {
	f := newCLIFixture(t)
	f.prompt("t1", "$ printf one >> log.txt", 1)
	f.h.Shutdown(context.Background())
	f.st.Close()
	path := strings.TrimPrefix(f.db, "sqlite:")
	dir := filepath.Dir(path)
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	before := dirState(t, dir)
	if len(before) != 1 {
		t.Fatalf("the store's directory holds %v, want the database alone", before)
	}
	for _, cmd := range []string{"questions list", "questions show t1 hitl_call_1_1", "threads list", "threads show t1", "audit"} {
		code, out, errOut := f.store(cmd)
		if code != 0 || out == "" {
			t.Errorf("%s: exit %d, %s%s", cmd, code, out, errOut)
		}
		if after := dirState(t, dir); !maps.Equal(after, before) {
			t.Fatalf("%s changed the store's directory:\nbefore %v\nafter  %v", cmd, before, after)
		}
	}
	if os.Geteuid() == 0 {
		t.Log("as root: a file's mode does not stop a write; answering is not tried")
		return
	}
	want := "the store at " + path + " is read-only for you"
	if code, _, errOut := f.store("questions answer", "t1", "hitl_call_1_1", "approve"); code != 1 || !strings.Contains(errOut, "tollgate questions answer: cannot answer: "+want) {
		t.Errorf("answer on a read-only store: exit %d, %q", code, errOut)
	} else {
		t.Log(strings.TrimSpace(errOut))
	}
	if code, _, errOut := f.store("threads abort", "t1"); code != 1 || !strings.Contains(errOut, "tollgate threads abort: cannot abort: "+want) {
		t.Errorf("abort on a read-only store: exit %d, %q", code, errOut)
	} else {
		t.Log(strings.TrimSpace(errOut))
	}
}

// A store an older tollgate made is neither read nor answered, nor
// upgraded: the commands say what to do.
func TestStoreOlderSchemaSaysUpgrade(t *testing.T) {
	f := newCLIFixture(t)
	f.prompt("t1", "$ printf one >> log.txt", 1)
	f.h.Shutdown(context.Background())
	f.st.Close()
	path := strings.TrimPrefix(f.db, "sqlite:")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("DELETE FROM schema_version WHERE version = (SELECT max(version) FROM schema_version)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, cmd := range []string{"questions list", "threads show t1", "audit", "questions answer t1 hitl_call_1_1 approve", "threads abort t1"} {
		code, _, errOut := f.store(cmd)
		if code != 1 || !strings.Contains(errOut, "store "+path+": this store was made by an older tollgate; open it once with tollgate serve to upgrade it\n") {
			t.Errorf("%s: exit %d, %q", cmd, code, errOut)
		}
	}
}
