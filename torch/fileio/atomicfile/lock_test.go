package atomicfile

import (
	"context"
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
	_, err = LockDirWait(context.Background(), dir, 100*time.Millisecond)
	var le *LockedError
	if !errors.As(err, &le) || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("held lock: %v after %v", err, time.Since(start))
	}
	go func() {
		time.Sleep(150 * time.Millisecond)
		unlock()
	}()
	unlock2, err := LockDirWait(context.Background(), dir, 10*time.Second)
	if err != nil {
		t.Fatalf("lock released while waiting: %v", err)
	}
	unlock2()
	// An interruption ends the wait.
	unlock, err = LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := LockDirWait(ctx, dir, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("interrupted wait: %v", err)
	}
}

// TestHeldBy: a held lock is seen, with its holder's PID, without being taken; a released
// one and a folder without a lock file are not.
func TestHeldBy(t *testing.T) {
	if _, err := os.Stat("/proc/locks"); err != nil {
		t.Skip("no /proc/locks:", err)
	}
	dir := t.TempDir()
	if _, held := HeldBy(dir); held {
		t.Fatal("a folder without a lock file is held")
	}
	unlock, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	holder, held := HeldBy(dir)
	if !held {
		// A file system whose device numbers /proc/locks prints otherwise (the documented
		// limit) shows this process's lock under another name: skip there, fail elsewhere.
		b, _ := os.ReadFile("/proc/locks")
		if strings.Contains(string(b), fmt.Sprintf(" WRITE %d ", os.Getpid())) {
			t.Skipf("/proc/locks names this file system's files otherwise:\n%s", b)
		}
		t.Fatalf("held lock not seen; /proc/locks:\n%s", b)
	}
	if holder != fmt.Sprintf("ldtorch process %d", os.Getpid()) {
		t.Fatalf("held lock: holder %q", holder)
	}
	unlock()
	if holder, held := HeldBy(dir); held {
		t.Fatalf("released lock still held by %s", holder)
	}
}
