package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestLockDir: a second lock of a folder is refused naming the holder's PID, and free
// again once released.
func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	unlock, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockDir(dir)
	var le *LockedError
	if !errors.As(err, &le) || le.PID != fmt.Sprint(os.Getpid()) || !strings.Contains(err.Error(), "is in use by another run") {
		t.Fatalf("second lock: %v", err)
	}
	unlock()
	unlock2, err := LockDir(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	unlock2()
	if _, err := LockDir(dir + "/missing"); err == nil {
		t.Error("a missing folder was locked")
	}
}

// TestLockDirWait: a lock released while LockDirWait waits is taken; one held longer than
// the wait is the holder's *LockedError.
func TestLockDirWait(t *testing.T) {
	dir := t.TempDir()
	unlock, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = LockDirWait(dir, 100*time.Millisecond)
	var le *LockedError
	if !errors.As(err, &le) || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("held lock: %v after %v", err, time.Since(start))
	}
	go func() {
		time.Sleep(150 * time.Millisecond)
		unlock()
	}()
	unlock2, err := LockDirWait(dir, 10*time.Second)
	if err != nil {
		t.Fatalf("lock released while waiting: %v", err)
	}
	unlock2()
}
