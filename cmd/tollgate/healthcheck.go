package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// healthcheck runs `tollgate healthcheck`: GET the operator listener's
// /readyz and succeed only on 200. It is the container's HEALTHCHECK (the
// image has no shell or curl).
func healthcheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	addr := orDefault(getenv("TOLLGATE_ADMIN"), defaultAdmin)
	url := fs.String("url", "", "readiness URL; default: /readyz on TOLLGATE_ADMIN, else "+defaultAdmin)
	timeout := fs.Duration("timeout", 5*time.Second, "deadline of the check")
	if err := parseFlags(fs, "healthcheck", args, stdout); err != nil {
		return err
	}
	if *url == "" {
		if addr == adminOff {
			return errors.New("healthcheck: the operator listener is off (TOLLGATE_ADMIN=off); give --url")
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("healthcheck: TOLLGATE_ADMIN %q: %w", addr, err)
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		*url = "http://" + net.JoinHostPort(host, port) + "/readyz"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Fprintf(stdout, "%s", body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %d", *url, resp.StatusCode)
	}
	return nil
}
