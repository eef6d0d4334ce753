package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFile is the file in a SQLite data dir that one serve holds locked.
const lockFile = "serve.lock"

// lockDataDir takes the data dir for this serve: an exclusive flock(2) on
// dir/serve.lock, held until release, which removes the file (or until
// the process ends, however it ends: the kernel drops the lock with the
// file). A second serve on
// the same dir is refused with the holder's pid, instead of sharing the
// SQLite file silently (and, on a devnet restart, moving a live database
// aside under the other one).
func lockDataDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(holder))
			if pid == "" {
				pid = "unknown"
			}
			return nil, fmt.Errorf("data dir %s is in use by another tollgate serve (pid %s): give each serve its own --data-dir, or let replicas share a PostgreSQL --database", dir, pid)
		}
		return nil, fmt.Errorf("data dir %s: lock: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	// Released on a clean stop, the file goes with the lock: a data dir
	// left behind holds no serve.lock (one left by a process that died
	// is harmless, its lock gone with the process).
	return func() { os.Remove(path); f.Close() }, nil
}
