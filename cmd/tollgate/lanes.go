package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tollgate/tollgate/service/lanes"
)

// lanesCmd runs `tollgate lanes import FILE`: reads closes from a JSONL or
// CSV file and stores them in the data dir's store, all or nothing.
func lanesCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const lanesUsage = "usage: tollgate lanes import [--data-dir DIR | --database URL] [--format jsonl|csv] FILE"
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(stdout, lanesUsage)
		return flag.ErrHelp
	}
	if len(args) == 0 || args[0] != "import" {
		return errors.New(lanesUsage)
	}
	fs := flag.NewFlagSet("lanes import", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), lanesUsage+"\n\nFlags:")
		fs.PrintDefaults()
	}
	dataDir := fs.String("data-dir", serveDataDir(getenv), "directory of the store; default: serve's under the same environment ("+
		productionDataDir+" when TOLLGATE_CHAIN_RPC is set, else "+devnetDataDir+")")
	database := fs.String("database", getenv("TOLLGATE_DATABASE"), databaseUsage)
	format := fs.String("format", "", "jsonl or csv; empty: from the file name (.jsonl, .csv)")
	if err := parseFlags(fs, "lanes import", args[1:], stdout); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("lanes import: one FILE expected")
	}
	path := fs.Arg(0)
	if *format == "" {
		*format = strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	closes, err := lanes.Read(f, *format, time.Now())
	if err != nil {
		return fmt.Errorf("%s: %w; nothing was imported", path, err)
	}
	db, where, err := openStore(ctx, *database, *dataDir)
	if err != nil {
		return fmt.Errorf("store %s: %w", where, err)
	}
	defer db.Close()
	inserted, dups, err := db.ImportCloses(ctx, closes)
	if err != nil {
		return fmt.Errorf("%s: %w; nothing was imported", path, err)
	}
	fmt.Fprintf(stdout, "%s: %d closes read, %d new, %d already stored\n", path, len(closes), inserted, dups)
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// devnetTape is the sample tape devnet mode seeds: three lanes, 60 closes
// at fixed times (so re-seeding is a no-op), the last on 2026-11-01.
func devnetTape() []lanes.Close {
	names := []string{"eth-trend", "btc-range", "base-momentum"}
	last := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	var out []lanes.Close
	for i := range 60 {
		out = append(out, lanes.Close{
			ID:       fmt.Sprintf("devnet-sample-%03d", i),
			Lane:     names[i%len(names)],
			ClosedAt: last.Add(-time.Duration(59-i) * 7 * time.Hour),
		})
	}
	return out
}
