package sandboxhelper_test

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/sandboxhelper"
)

func TestMain(m *testing.M) {
	sandboxhelper.Main()
	os.Exit(m.Run())
}

// start runs the test binary as the helper in mode with config on fd 3,
// and returns what it reported on fd 4 and its exit code.
func start(t *testing.T, mode string, config []byte) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{sandboxhelper.Env + "=" + mode}
	cmd.ExtraFiles = []*os.File{cfgR, stW}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cfgR.Close()
	stW.Close()
	cfgW.Write(config)
	cfgW.Close()
	msg, _ := io.ReadAll(stR)
	err = cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return string(msg), code
}

// A helper refuses a configuration from another build, rather than run a
// command without what it does not understand (a masked path, a limit):
// a field it does not know, or another protocol.
func TestRefusesAnotherBuild(t *testing.T) {
	for _, mode := range []string{sandboxhelper.HelperMode, sandboxhelper.SuperviseMode} {
		cases := []struct {
			name string
			cfg  map[string]any
			want string
		}{
			{"another protocol", map[string]any{"protocol": "0-0000000000000000", "shell": "/bin/true"}, "built from other source"},
			{"an unknown field", map[string]any{"protocol": sandboxhelper.Protocol(), "shell": "/bin/true", "masked_later": []string{"/secret"}}, `unknown field "masked_later"`},
		}
		for _, c := range cases {
			t.Run(mode+"/"+c.name, func(t *testing.T) {
				data, _ := json.Marshal(c.cfg)
				msg, code := start(t, mode, data)
				if code != 125 || !strings.Contains(msg, c.want) {
					t.Fatalf("exit %d, reported %q; want 125 and %q", code, msg, c.want)
				}
			})
		}
	}
}

// The protocol a tool asks of a helper binary before using it.
func TestProtocolMode(t *testing.T) {
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = []string{sandboxhelper.Env + "=" + sandboxhelper.ProtocolMode}
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != sandboxhelper.Protocol() {
		t.Fatalf("protocol mode printed %q (%v), want %s", out, err, sandboxhelper.Protocol())
	}
}
