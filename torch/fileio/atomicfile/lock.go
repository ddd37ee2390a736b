package atomicfile

// lock.go: one writer per folder. A run (distill, each cell of a sweep, a study) takes an
// exclusive flock on DIR/.ldtorch.lock for as long as it writes there and writes its PID
// into it; a second writer is refused at once, naming the holder. Locks held only for a
// moment (a sweep folder's, while its grid or summary is written) are waited for
// (LockDirWait). The kernel drops the lock when the process dies, so a killed run never
// leaves a stale lock (the file itself stays).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LockFile is the lock file's name inside a folder.
const LockFile = ".ldtorch.lock"

// LockedError is a folder whose lock another process holds.
type LockedError struct {
	Dir, Path string
	PID       string // the holder's PID as it wrote it; "" when unknown
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("%s is in use by another run (%s holds %s)", e.Dir, e.Holder(), e.Path)
}

// Holder names the process holding the lock: "ldtorch process 12345".
func (e *LockedError) Holder() string {
	if e.PID == "" {
		return "another ldtorch process"
	}
	return "ldtorch process " + e.PID
}

// LockDir takes the exclusive lock of dir (which must exist), writing this process's PID
// into the lock file, and returns the function that releases it. A folder locked by
// another process is a *LockedError; other failures name the lock file.
func LockDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := io.ReadAll(io.LimitReader(f, 32))
			return nil, &LockedError{Dir: dir, Path: path, PID: strings.TrimSpace(string(b))}
		}
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(fmt.Sprintf("%d\n", os.Getpid())), 0)
	}
	return func() { f.Close() }, nil
}

// LockDirWait is LockDir for a lock that others hold only for a moment: while another
// process holds it, it tries again until wait has passed (then the *LockedError) or ctx is
// done (ctx's error).
func LockDirWait(ctx context.Context, dir string, wait time.Duration) (unlock func(), err error) {
	deadline := time.Now().Add(wait)
	for {
		unlock, err := LockDir(dir)
		var le *LockedError
		if !errors.As(err, &le) || time.Now().After(deadline) {
			return unlock, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// HeldBy reports whether a process holds dir's lock and names it ("ldtorch process 123"),
// without taking the lock (taking it, even for a moment, could refuse a run starting
// then): it reads the kernel's table of locks, /proc/locks. Where that table cannot be read
// or does not name the lock file (not Linux; file systems whose device numbers differ
// there), it reports false.
func HeldBy(dir string) (holder string, held bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, LockFile), &st); err != nil {
		return "", false
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return "", false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4<<20))
	if err != nil {
		return "", false
	}
	// The device as the kernel prints it there: major:minor in hex, then the inode.
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff)
	minor := dev&0xff | (dev>>12)&^uint64(0xff)
	file := fmt.Sprintf("%02x:%02x:%d", major, minor, uint64(st.Ino))
	for _, line := range strings.Split(string(b), "\n") {
		// "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5325151 0 EOF" (a waiter's line has "->"
		// after the number, so its fields do not match).
		fields := strings.Fields(line)
		if len(fields) >= 6 && fields[1] == "FLOCK" && fields[5] == file {
			if _, err := strconv.Atoi(fields[4]); err != nil {
				return (&LockedError{}).Holder(), true
			}
			return (&LockedError{PID: fields[4]}).Holder(), true
		}
	}
	return "", false
}
