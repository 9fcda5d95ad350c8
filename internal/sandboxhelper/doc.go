// Package sandboxhelper is the process package tools/bash starts for every
// command it runs: the sandbox helper, which confines a command (the
// namespaces it was started in, rlimits, the mount view, capabilities
// dropped, Landlock, seccomp) and execs the shell, and the supervisor,
// which keeps what an unconfined command (or a confined one without a PID
// namespace) starts from outliving it. It imports no more than that needs
// (golang.org/x/sys/unix, go-landlock), so that the binary that holds it
// alone, cmd/tollgate-sandbox, starts in a fraction of the time tollgate
// does: every command needs one start of it (two without a PID namespace;
// tools/bash starts the helper of a PID namespace a command ahead, so
// that its start is off the command's path), and tollgate's start-up is
// tens of milliseconds of package initialisation (SDKs, CEL, protobuf
// descriptors; bench/README.md).
//
// # Where the helper binary comes from
//
// tools/bash starts, in this order of preference:
//
//   - cmd/tollgate-sandbox next to the executable (os.Executable's
//     directory), if no one but root and the process's user can replace
//     the file or a directory above it, and it answers this build's
//     Protocol;
//   - otherwise the executable itself, re-executed (its main calls
//     bash.MaybeRunHelper, which calls Main): slower, as confining as the
//     helper binary, and what `tollgate sandbox check` then says it does,
//     and why.
//
// The helper is a file beside tollgate rather than embedded in it and
// extracted to a cache directory. An extracted copy must be trusted each
// time it runs: an attacker who can write the cache directory could swap
// it between a check of its hash and its exec, so it would have to be
// hashed through an open descriptor and executed from that descriptor
// (/proc/self/fd/N, or a memfd), on every command, and os/exec renumbers
// descriptors in the child (ExtraFiles become 3, 4, 5), so the descriptor
// to execute would have to be kept out of their way; and the copy would
// cost tollgate its size again. A file next to the executable needs none
// of that: `go install ./cmd/...` puts both in one directory, whoever can
// replace the helper there could replace tollgate itself, and the checks
// above refuse a helper anyone else could replace (the file, or any
// directory above it, writable by another user), which closes the window
// between check and exec instead of racing it. Without the helper
// (`go install ./cmd/tollgate`, go run, a test binary), nothing is lost
// but time.
//
// # A helper from another build
//
// A helper binary left from another build of tollgate (after
// `go install ./cmd/tollgate` alone, say) may confine a command otherwise
// than this build would: other Landlock rules, another seccomp filter,
// mount view or masking, an older go-landlock; and it could drop a field
// of its configuration (Config or SuperviseConfig, as JSON) it does not
// know (a masked path, a limit) and run the command without it. So the
// two sides compare their Protocol: a version, then a hash of both
// types' fields, of this package's source (embedded: every .go file but
// the tests) and of the Go version, then a hash of the versions of the
// modules the helper links (go-landlock, golang.org/x/sys). tools/bash
// asks a helper binary its Protocol (ProtocolMode) before it uses it,
// and re-executes itself otherwise; the helper refuses a configuration
// from another Protocol, and one with fields it does not know. Only a
// test binary, whose build information lists no modules, is compared
// without the modules' versions (SameProtocol).
package sandboxhelper
