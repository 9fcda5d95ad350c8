package sandboxhelper

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// The confined command's view of the file system: the helper starts in a
// mount namespace of its own (CLONE_NEWNS) and, while it still has its
// capabilities there, builds the view the command gets:
//
//   - every mount read-only (mount_setattr, recursively, on /);
//   - the working directory as it is (writable under workspace-write,
//     read-only otherwise), the private TMPDIR writable, and the sockets
//     an operator listed (workspace-write only), each a
//     clone of its mount taken before anything was covered, placed back
//     at its path;
//   - an empty, read-only /tmp and /run (and /var/run where it is a
//     directory of its own): no socket of a database, a bus or a daemon
//     there, whatever the command does;
//   - a fresh /proc of the command's PID namespace, read-only (host
//     processes, and their command lines, are not in it); without a PID
//     namespace, an empty /proc;
//   - every masked path (Config.Masked) covered by an
//     empty, read-only directory or file: tollgate's store, policy and
//     tokens are not there to read or write, even inside the working
//     directory. A masked path that does not exist when the command
//     starts is not covered (mask a directory where one holds the state).
//
// The command then has no capabilities, so it cannot unmount or remount
// anything to see what is below.

// DefaultMasked are paths every confined command's view covers besides
// [Options.Masked]: database data and socket directories outside /run and
// /tmp (both empty in the view anyway), and POSIX shared memory.
var DefaultMasked = []string{"/var/lib/postgresql", "/var/lib/mysql", "/var/pgsql_socket", "/dev/shm"}

// maskSource is where the view's empty directory and file are made (in a
// tmpfs mounted on /run, which is covered afterwards).
const (
	maskDir  = "/run/.tollgate-mask-dir"
	maskFile = "/run/.tollgate-mask-file"
)

// keep is a directory or socket that stays visible as it is.
type keep struct {
	path string
	fd   int
	ro   bool
	dir  bool
}

// setupView builds the view in the helper's mount namespace.
func setupView(c Config) error {
	fail := func(what string, err error) error { return fmt.Errorf("mount view: %s: %w", what, err) }
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fail("making mounts private", err)
	}
	var keeps []keep
	defer func() {
		for _, k := range keeps {
			unix.Close(k.fd)
		}
	}()
	add := func(path string, ro, optional bool) error {
		st, err := os.Stat(path)
		if err != nil {
			if optional {
				return nil
			}
			return fail("keeping "+path, err)
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fail("keeping "+path, err)
		}
		keeps = append(keeps, keep{path: path, fd: fd, ro: ro, dir: st.IsDir()})
		return nil
	}
	if err := add(c.Dir, c.Profile != WorkspaceWrite, false); err != nil {
		return err
	}
	if err := add(c.Tmp, false, false); err != nil {
		return err
	}
	if c.Profile == WorkspaceWrite {
		for _, s := range c.Sockets {
			if err := add(s, true, true); err != nil {
				return err
			}
		}
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE,
		&unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID}); err != nil {
		return fail("making / read-only", err)
	}
	// /run: the source of the empty directory and file that mask, then
	// covered (it holds only what was placed in it).
	if err := unix.Mount("tmpfs", "/run", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=755,size=64k"); err != nil {
		return fail("a private /run", err)
	}
	if err := os.Mkdir(maskDir, 0o555); err != nil {
		return fail("the mask", err)
	}
	if err := os.WriteFile(maskFile, nil, 0o444); err != nil {
		return fail("the mask", err)
	}
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=64k"); err != nil {
		return fail("a private /tmp", err)
	}
	if fi, err := os.Lstat("/var/run"); err == nil && fi.IsDir() {
		if err := mask("/var/run", true); err != nil {
			return err
		}
	}
	if c.FreshProc {
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fail("a fresh /proc", err)
		}
		if c.PidMax > 0 {
			if err := os.WriteFile("/proc/sys/kernel/pid_max", []byte(strconv.FormatUint(c.PidMax, 10)), 0); err != nil {
				return fail("the process cap (pid_max)", err)
			}
		}
		if err := unix.Mount("", "/proc", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fail("a read-only /proc", err)
		}
	} else if err := mask("/proc", true); err != nil {
		return err
	}
	// Parents before what is inside them.
	slices.SortStableFunc(keeps, func(a, b keep) int { return len(a.path) - len(b.path) })
	for _, k := range keeps {
		if err := place(k); err != nil {
			return err
		}
	}
	for _, p := range c.Masked {
		st, err := os.Stat(p)
		if err != nil {
			continue // not there: nothing to hide
		}
		if err := mask(p, st.IsDir()); err != nil {
			return err
		}
	}
	if err := os.Remove(maskFile); err != nil {
		return fail("the mask", err)
	}
	if err := os.Remove(maskDir); err != nil {
		return fail("the mask", err)
	}
	for _, p := range []string{"/run", "/tmp"} {
		if err := unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return fail("a read-only "+p, err)
		}
	}
	// The helper's working directory is the one it was started in, below
	// the working directory's clone: it enters the clone.
	if err := unix.Chdir(c.Dir); err != nil {
		return fail("entering the working directory", err)
	}
	return nil
}

// place mounts k's clone at its path, making the path first where the
// view has none (under the private /tmp or /run).
func place(k keep) error {
	fail := func(err error) error { return fmt.Errorf("mount view: placing %s: %w", k.path, err) }
	if k.ro {
		if err := unix.MountSetattr(k.fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE,
			&unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID}); err != nil {
			return fail(err)
		}
	}
	if _, err := os.Lstat(k.path); errors.Is(err, os.ErrNotExist) {
		if k.dir {
			err = os.MkdirAll(k.path, 0o755)
		} else if err = os.MkdirAll(filepath.Dir(k.path), 0o755); err == nil {
			err = os.WriteFile(k.path, nil, 0o444)
		}
		if err != nil {
			return fail(err)
		}
	}
	if err := unix.MoveMount(k.fd, "", unix.AT_FDCWD, k.path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fail(err)
	}
	return nil
}

// mask covers path with the empty directory or file, read-only.
func mask(path string, dir bool) error {
	src := maskFile
	if dir {
		src = maskDir
	}
	if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mount view: masking %s: %w", path, err)
	}
	if err := unix.Mount("", path, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount view: masking %s: %w", path, err)
	}
	return nil
}
