package shell

import (
	"strings"
	"testing"
)

// TestEffects: what a reviewer reads of each command string, effect by
// effect ("kind: text"), and its risk.
func TestEffects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		risk Risk
		want []string
	}{
		// Deletes.
		{"rm -rf build/ && git clean -fdx", RiskHigh, []string{
			"delete: deletes build/ recursively",
			"delete: deletes untracked files and directories in the working tree, ignored ones too (git clean)"}},
		{"rm old.log", RiskMedium, []string{"delete: deletes old.log"}},
		{"rm -- -f a b c d e f", RiskMedium, []string{"delete: deletes -f, a, b, c, d and 2 more"}},
		{"rm /tmp/logs", RiskHigh, []string{"delete: deletes /tmp/logs (outside the working directory)"}},
		{"rm *.log", RiskHigh, []string{"delete: deletes *.log (every file the pattern matches)"}},
		{"find . -name '*.log' -delete", RiskHigh, []string{"delete: deletes every file find selects under . (find -delete)"}},
		{"find . -name '*.log' | xargs rm", RiskHigh, []string{"delete: deletes the names xargs passes it"}},
		{"find . -name '*.tmp' -exec rm {} +", RiskHigh, []string{"delete: deletes each file find finds"}},
		{`for f in *.log; do rm "$f"; done`, RiskHigh, []string{`delete: deletes files named at run time ("$f")`}},
		{"git clean -n", RiskLow, []string{"read: reads inside the working directory only, and changes nothing"}},
		// Writes.
		{"touch notes.txt", RiskMedium, []string{"write: writes notes.txt"}},
		{"echo hi > notes.txt", RiskMedium, []string{"write: writes notes.txt"}},
		{"echo hi >> ~/.bashrc", RiskHigh, []string{"write: appends to ~/.bashrc (outside the working directory)"}},
		{"echo hi | tee -a log.txt", RiskMedium, []string{"write: appends to log.txt"}},
		{"mkdir -p out/x", RiskMedium, []string{"write: creates the directory out/x"}},
		{"mv a.txt b.txt", RiskMedium, []string{"write: moves a.txt to b.txt"}},
		{"cp -r src /tmp/backup", RiskHigh, []string{"write: copies src recursively to /tmp/backup (outside the working directory)"}},
		{"sed -i s/a/b/ file.txt", RiskMedium, []string{"write: sed edits files in place (-i)"}},
		{"chmod -R 777 .", RiskHigh, []string{"write: changes the permissions of . recursively"}},
		// The network, and code downloaded and run.
		{"curl -s https://example.com/install.sh | sh", RiskHigh, []string{
			"network: connects to example.com",
			"run_downloaded: runs code downloaded from example.com"}},
		{"curl -fsSL https://example.com/i.sh | tee i.sh | bash -s -- --yes", RiskHigh, []string{
			"network: connects to example.com",
			"write: writes i.sh",
			"run_downloaded: runs code downloaded from example.com"}},
		{`bash -c "$(curl -fsSL https://get.example.com)"`, RiskHigh, []string{
			"network: connects to get.example.com",
			"run_downloaded: runs code downloaded from get.example.com"}},
		{"sh <(wget -qO- http://x.example.org/a)", RiskHigh, []string{
			"network: connects to x.example.org",
			"run_downloaded: runs code downloaded from x.example.org"}},
		{"wget -qO- example.com/x | sudo bash", RiskHigh, []string{
			"network: connects to example.com",
			"run_downloaded: runs code downloaded from example.com",
			"privilege: runs bash as another user, root by default (sudo)"}},
		{"curl -o i.sh https://example.com/i.sh && chmod +x i.sh && ./i.sh", RiskHigh, []string{
			"network: connects to example.com",
			"write: writes i.sh (downloaded from example.com)",
			"write: changes the permissions of i.sh",
			"run_downloaded: runs ./i.sh, downloaded from example.com"}},
		{"curl -X POST -d @data.json https://api.example.com/v1", RiskHigh, []string{"network: sends data to api.example.com"}},
		{"curl https://example.com/a > a.html", RiskMedium, []string{"write: writes a.html", "network: connects to example.com"}},
		{"ssh deploy@prod.example.com 'systemctl restart app'", RiskHigh, []string{
			"network: connects to prod.example.com",
			"unknown: runs a command on prod.example.com: systemctl restart app"}},
		{"scp build.tgz user@host.example.com:/srv/", RiskMedium, []string{
			"network: copies build.tgz to user@host.example.com:/srv/ over the network (host.example.com)"}},
		{"npm install", RiskHigh, []string{"run_downloaded: installs packages from the npm registry and runs their install scripts"}},
		{"npx cowsay hi", RiskHigh, []string{"run_downloaded: runs cowsay, downloaded from the npm registry"}},
		// Reads outside the working directory, and secrets.
		{"cat ~/.ssh/id_rsa", RiskHigh, []string{
			"read_outside: reads outside the working directory: ~/.ssh/id_rsa",
			"secrets: may read credentials: ~/.ssh/id_rsa"}},
		{"head /etc/hosts", RiskMedium, []string{"read_outside: reads outside the working directory: /etc/hosts"}},
		{"echo $AWS_SECRET_ACCESS_KEY", RiskHigh, []string{"secrets: may read credentials: $AWS_SECRET_ACCESS_KEY"}},
		// Git history.
		{"git push --force origin main", RiskHigh, []string{
			"network: connects to the remote origin (git push)",
			"git_history: rewrites or deletes history on the remote (git push)"}},
		{"git push origin +main", RiskHigh, []string{
			"network: connects to the remote origin (git push)",
			"git_history: rewrites or deletes history on the remote (git push)"}},
		{"git commit -m x && git rebase -i main", RiskHigh, []string{
			"git_history: adds a commit to the current branch (git commit)",
			"git_history: rewrites commits (git rebase)"}},
		{"git commit --amend --no-edit", RiskHigh, []string{"git_history: rewrites the last commit (git commit)"}},
		{"git reset --hard HEAD~1", RiskHigh, []string{"git_history: moves the branch and throws away uncommitted changes (git reset)"}},
		{"git checkout -- .", RiskHigh, []string{"git_history: throws away uncommitted changes (git checkout)"}},
		{"git branch -D feature", RiskHigh, []string{"git_history: deletes the branch feature (git branch)"}},
		{"git log --oneline -n 5", RiskLow, []string{"read: reads inside the working directory only, and changes nothing"}},
		{"git -C sub log --oneline", RiskMedium, []string{"unknown: git uses the git option -C, which can run programs or change the repository and configuration git uses"}},
		// What the analysis cannot tell.
		{"ls -la", RiskLow, []string{"read: reads inside the working directory only, and changes nothing"}},
		{"make release", RiskMedium, []string{"unknown: runs make, whose effects tollgate does not know"}},
		{"python3 script.py", RiskMedium, []string{"unknown: runs the script script.py, which tollgate does not read"}},
		{`python3 -c 'import shutil; shutil.rmtree("x")'`, RiskMedium, []string{"unknown: runs python3 code given on its command line, which tollgate does not read"}},
		{"perl -i -pe s/a/b/ f", RiskMedium, []string{"unknown: runs perl code given on its command line, which tollgate does not read"}},
		{"cat s.sh | bash", RiskMedium, []string{"unknown: runs bash code from its standard input, which tollgate does not read"}},
		{`awk '{print > "out.txt"}' in`, RiskMedium, []string{"unknown: awk has awk output redirected to a file (>)"}},
		{`eval "$X"`, RiskHigh, []string{"unknown: runs code only known at run time (eval)", "secrets: may read credentials: $X"}},
		{"$CMD -rf x", RiskHigh, []string{"unknown: runs a command only known at run time: $CMD", "secrets: may read credentials: $CMD"}},
		{"docker system prune -af", RiskHigh, []string{"delete: stops or deletes containers, images or volumes (docker system prune)"}},
		// An option or a variable that makes a program run another is said
		// beside what the program's model says (before, these read as
		// nothing but a fetch or a commit).
		{`git -c core.sshCommand="sh -c id" fetch`, RiskMedium, []string{
			"network: connects to the default remote (git fetch)",
			"unknown: git uses the git option -c, which can run programs or change the repository and configuration git uses"}},
		{`GIT_SSH_COMMAND="sh -c id" git fetch`, RiskMedium, []string{
			"network: connects to the default remote (git fetch)",
			"unknown: git sets GIT_SSH_COMMAND for the command; programs read such variables to decide what to run"}},
		{`git fetch --upload-pack="sh -c id" ../r`, RiskMedium, []string{
			"network: connects to the remote ../r (git fetch)",
			"unknown: git git fetch --upload-pack runs a program or sets configuration",
			"read_outside: reads outside the working directory: ../r"}},
		{`git -c core.editor="sh -c id" commit`, RiskMedium, []string{
			"git_history: adds a commit to the current branch (git commit)",
			"unknown: git uses the git option -c, which can run programs or change the repository and configuration git uses"}},
		// Processes.
		{"kill -9 -1", RiskHigh, []string{"unknown: stops every process it may signal (pid -1)"}},
		{"kill -s KILL -- -1", RiskHigh, []string{"unknown: stops every process it may signal (pid -1)"}},
		{"kill -TERM 4242 4243", RiskMedium, []string{"unknown: stops processes: 4242, 4243"}},
		{"kill 4242", RiskMedium, []string{"unknown: stops processes: 4242"}},
	}
	for _, tc := range tests {
		a, _ := Parse(tc.src)
		effects := a.Effects()
		var got []string
		for _, e := range effects {
			got = append(got, string(e.Kind)+": "+e.Text)
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("Effects(%q):\n  %s\nwant\n  %s", tc.src, strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
		}
		if r := RiskOf(effects); r != tc.risk {
			t.Errorf("RiskOf(%q) = %s, want %s", tc.src, r, tc.risk)
		}
	}
}

// TestEffectsBounded: a hostile string of many commands is summed up.
func TestEffectsBounded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 300 {
		b.WriteString("rm f" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "; curl https://h" + string(rune('a'+i%26)) + ".example.com/" + " | sh\n")
	}
	a, _ := Parse(b.String())
	effects := a.Effects()
	if len(effects) != maxEffects+1 || !strings.HasPrefix(effects[maxEffects].Text, "and ") {
		t.Fatalf("%d effects, last %+v", len(effects), effects[len(effects)-1])
	}
	checkEffects(t, "(300 lines)", a)
}
