package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/payment/exact"
	"github.com/tollgate/tollgate/store"
)

const ledgerUsage = `usage:
  tollgate ledger list      [--data-dir DIR | --database URL] [--state S] [--since T] [--payer 0x...]
  tollgate ledger export    [--data-dir DIR | --database URL] [--state S] [--since T] [--payer 0x...]   (CSV on stdout)
  tollgate ledger reconcile [--data-dir DIR | --database URL] --chain-rpc URL [--pay-to 0x...]
  tollgate ledger channels  [--data-dir DIR | --database URL] [--txs N]   (batch-settlement channels, claims and settles)
list and export show both schemes: exact's payments and batch-settlement's voucher calls.
T is an RFC 3339 time or a duration back from now (24h); S is an exact payment's state (verified, pending,
settled, failed, released), charged (a voucher call), or paid (settled or charged: what /metrics counts).`

// ledgerCmd runs `tollgate ledger list|export|reconcile|channels`: the operator's
// view of the money, without SQL.
func ledgerCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(stdout, ledgerUsage)
		return flag.ErrHelp
	}
	if len(args) == 0 {
		return errors.New(ledgerUsage)
	}
	sub := args[0]
	fs := flag.NewFlagSet("ledger "+sub, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), ledgerUsage+"\n\nFlags of ledger "+sub+":")
		fs.PrintDefaults()
	}
	dataDir := fs.String("data-dir", serveDataDir(getenv), "directory of the store; default: serve's under the same environment ("+
		productionDataDir+" when TOLLGATE_CHAIN_RPC is set, else "+devnetDataDir+")")
	database := fs.String("database", getenv("TOLLGATE_DATABASE"), databaseUsage)
	var filter store.Filter
	var since string
	var chainRPC, payTo *string
	var txLimit int
	switch sub {
	case "list", "export":
		fs.StringVar(&filter.State, "state", "", "only payments in this state: verified, pending, settled, failed, released (exact), charged (batch-settlement), or paid (settled or charged)")
		fs.StringVar(&since, "since", "", "only payments first seen (exact) or charged (batch-settlement) since this RFC 3339 time, or this long ago (e.g. 24h)")
		fs.StringVar(&filter.Payer, "payer", "", "only this payer's payments and voucher calls")
	case "reconcile":
		chainRPC = fs.String("chain-rpc", getenv("TOLLGATE_CHAIN_RPC"), "Ethereum JSON-RPC URL of the chain the payments were made on (devnet: the running serve's --devnet-rpc, e.g. http://127.0.0.1:8545)")
		payTo = fs.String("pay-to", getenv("TOLLGATE_PAY_TO"), "recipient of payments recorded before the ledger kept one per payment")
	case "channels":
		fs.IntVar(&txLimit, "txs", 20, "how many of the latest claim and settle transactions to list (0: all)")
	default:
		return fmt.Errorf("ledger: unknown command %q\n%s", sub, ledgerUsage)
	}
	if err := parseFlags(fs, "ledger "+sub, args[1:], stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("ledger %s: unexpected arguments %q", sub, fs.Args())
	}
	var err error
	if filter.Since, err = parseSince(since, time.Now()); err != nil {
		return err
	}
	if err := checkState(filter.State); err != nil {
		return err
	}
	if filter.Payer != "" && !common.IsHexAddress(filter.Payer) {
		return fmt.Errorf("--payer %q is not an address", filter.Payer)
	}
	db, where, err := openStore(ctx, *database, *dataDir)
	if err != nil {
		return fmt.Errorf("store %s: %w", where, err)
	}
	defer db.Close()
	d, bound, err := db.Deployment(ctx)
	if err != nil {
		return err
	}
	if bound {
		fmt.Fprintf(stderr, "store %s: ledger of %s\n", where, d)
	}
	switch sub {
	case "list":
		es, err := books(ctx, db, filter)
		if err != nil {
			return err
		}
		return writeList(stdout, es)
	case "export":
		es, err := books(ctx, db, filter)
		if err != nil {
			return err
		}
		return writeCSV(stdout, es)
	case "channels":
		chans, err := db.Channels(ctx)
		if err != nil {
			return err
		}
		txs, err := db.BatchTxs(ctx, txLimit)
		if err != nil {
			return err
		}
		return writeChannels(stdout, chans, txs, time.Now())
	default:
		return reconcileOnce(ctx, db, *chainRPC, *payTo, stdout, stderr)
	}
}

// databaseUsage documents --database wherever the store is opened.
const databaseUsage = "PostgreSQL URL of the store (postgres://user:password@host:5432/db?sslmode=...), shared by every replica; empty: SQLite in the data dir"

// validDatabase checks a --database value: empty or a postgres:// URL.
// Errors name the host only: the URL may hold a password.
func validDatabase(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("--database: not a URL (want postgres://user:password@host:5432/db)")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" || u.Host == "" && u.Query().Get("host") == "" {
		return fmt.Errorf("--database %s: want postgres://user:password@host:5432/db", redactURL(raw))
	}
	return nil
}

// openStore opens the store: PostgreSQL when database is set, else SQLite
// in dataDir. where names it for messages, without credentials.
func openStore(ctx context.Context, database, dataDir string) (db *store.DB, where string, err error) {
	if database == "" {
		db, err = store.OpenSQLite(ctx, dataDir)
		return db, dataDir, err
	}
	where = redactURL(database)
	if err := validDatabase(database); err != nil {
		return nil, where, err
	}
	db, err = store.OpenPostgres(ctx, database)
	return db, where, err
}

// serveDataDir is the store serve would use under getenv:
// TOLLGATE_DATA_DIR, else the default of the mode TOLLGATE_CHAIN_RPC
// selects.
func serveDataDir(getenv func(string) string) string {
	return orDefault(getenv("TOLLGATE_DATA_DIR"), defaultDataDir(getenv("TOLLGATE_CHAIN_RPC") != ""))
}

// parseSince reads --since: empty, an RFC 3339 time, or a duration before
// now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want an RFC 3339 time (2026-11-01T00:00:00Z) or a duration (24h)", s)
}

// statePaid selects what the books count as paid (paid_totals, the JSON
// /metrics' paid and revenue): exact's settled payments and every voucher
// call.
const statePaid = "paid"

func checkState(s string) error {
	switch s {
	case "", exact.StateVerified, exact.StatePending, exact.StateSettled, exact.StateFailed, exact.StateReleased, store.StateCharged, statePaid:
		return nil
	}
	return fmt.Errorf("--state %q: want verified, pending, settled, failed, released, charged or paid", s)
}

// entry is one line of the operator's books: an exact payment, in any
// state, or a batch-settlement voucher call, charged. Tx is exact's
// settlement; a voucher call has none (its money moves with its
// channel's claim and settle), and names its Channel and the
// Cumulative total that keys it instead.
type entry struct {
	At                                      time.Time
	Scheme, Operation, Payer, Amount, State string
	Tx, Reason, Asset, Nonce, Resource      string
	Channel, Cumulative, PayTo              string
	PaymentID                               string // the payment-identifier extension's id it was paid with
	paid                                    bool   // counted in paid_totals
}

// books reads both schemes' calls matching f, oldest first (exact's by
// when the payment was first seen, voucher calls by when they were
// charged; exact first at the same instant).
func books(ctx context.Context, db *store.DB, f store.Filter) ([]entry, error) {
	exactF, batchF := f, f
	if f.State == statePaid {
		exactF.State, batchF.State = exact.StateSettled, store.StateCharged
	}
	recs, err := db.List(ctx, exactF)
	if err != nil {
		return nil, err
	}
	charges, err := db.BatchCharges(ctx, batchF)
	if err != nil {
		return nil, err
	}
	out := make([]entry, 0, len(recs)+len(charges))
	for _, r := range recs {
		out = append(out, entry{At: r.CreatedAt, Scheme: exact.Scheme, Operation: r.Operation, Payer: r.Payer, Amount: r.Amount,
			State: r.State, Tx: r.Tx, Reason: r.Reason, Asset: r.Asset, Nonce: r.Nonce, Resource: r.Resource, PayTo: r.PayTo,
			paid: r.State == exact.StateSettled})
	}
	for _, c := range charges {
		out = append(out, entry{At: c.At, Scheme: batch.Scheme, Operation: c.Operation, Payer: c.Payer.Hex(), Amount: c.Amount.String(),
			State: store.StateCharged, Asset: c.Asset.Hex(), Resource: c.Resource, Channel: c.Channel.Hex(),
			Cumulative: c.Cumulative.String(), PayTo: c.PayTo.Hex(), paid: true})
	}
	slices.SortStableFunc(out, func(a, b entry) int { return a.At.Compare(b.At) })
	ids, err := paymentIDs(ctx, db, f.Since)
	if err != nil {
		return nil, err
	}
	for i, e := range out {
		out[i].PaymentID = ids[strings.ToLower(e.Tx+e.Channel+":"+e.Cumulative)]
	}
	return out, nil
}

// paymentIDs maps the payments answered with a payment identifier since
// since to their ids: an exact payment by its settlement's transaction
// ("0x…:"), a voucher call by its channel and cumulative total
// ("0x…:150000"), as entry's Tx, Channel and Cumulative name them.
func paymentIDs(ctx context.Context, db *store.DB, since time.Time) (map[string]string, error) {
	recs, err := db.PaymentIDs(ctx, since)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(recs))
	for _, r := range recs {
		var s struct {
			Transaction string
			Extra       struct {
				ChannelState *struct {
					ChannelID               string
					ChargedCumulativeAmount string
				}
			}
		}
		if json.Unmarshal(r.Settlement, &s) != nil {
			continue
		}
		key := s.Transaction + ":"
		if st := s.Extra.ChannelState; st != nil {
			key = st.ChannelID + ":" + st.ChargedCumulativeAmount
		}
		out[strings.ToLower(key)] = r.ID
	}
	return out, nil
}

// usd writes atomic units of the store's asset (USDC's 6 decimals, as
// the gate prices it) as exact dollars: "0.05", never a rounded float.
// An amount that is not an integer is shown as "?".
func usd(atomic string) string {
	n, ok := new(big.Int).SetString(atomic, 10)
	if !ok {
		return "?"
	}
	s := new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(usdcDecimals), nil)).FloatString(usdcDecimals)
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// writeList prints both schemes' calls as an aligned table, amounts in
// atomic units and in USD, then the totals: exact's settled payments,
// the voucher calls charged, and their sum, the paid count and revenue
// /metrics shows for the same calls. TX/CHANNEL is an exact payment's
// settlement transaction, or a voucher call's channel.
func writeList(w io.Writer, es []entry) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSCHEME\tOPERATION\tPAYER\tAMOUNT\tUSD\tSTATE\tTX/CHANNEL\tREASON\tPAYMENT ID")
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339), e.Scheme, e.Operation, e.Payer, e.Amount,
			usd(e.Amount), e.State, orDash(e.Tx+e.Channel), orDash(e.Reason), orDash(e.PaymentID))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var settled, charged int
	settledSum, chargedSum := new(big.Int), new(big.Int)
	for _, e := range es {
		n, ok := new(big.Int).SetString(e.Amount, 10)
		switch {
		case !ok || !e.paid:
		case e.Scheme == exact.Scheme:
			settled++
			settledSum.Add(settledSum, n)
		default:
			charged++
			chargedSum.Add(chargedSum, n)
		}
	}
	paid := new(big.Int).Add(settledSum, chargedSum)
	_, err := fmt.Fprintf(w, "%d payments: %d settled by %s for %s, %d charged by %s for %s; %d paid for %s\n",
		len(es), settled, exact.Scheme, dollars(settledSum), charged, batch.Scheme, dollars(chargedSum), settled+charged, dollars(paid))
	return err
}

// money writes atomic units as dollars with at least the cents: "$1.00",
// "$0.05", "$0.035".
func money(n *big.Int) string {
	s := usd(n.String())
	switch i := strings.IndexByte(s, '.'); {
	case i < 0:
		s += ".00"
	case len(s)-i == 2:
		s += "0"
	}
	return "$" + s
}

// dollars writes atomic units as "$0.05 (50000 atomic units)": the money,
// then what the chain and the store hold.
func dollars(n *big.Int) string {
	return fmt.Sprintf("%s (%s atomic units)", money(n), n)
}

// cell writes an amount for a table cell: "$0.05 (50000)".
func cell(n *big.Int) string {
	return fmt.Sprintf("%s (%s)", money(n), n)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// csvHeader returns the export's columns. The first six are what an
// operator matches to the chain (time, operation, payer, amount in atomic
// units, tx, state), then reason, asset, nonce and resource: the export's
// columns before batch-settlement, in their order, so that a consumer
// reading them by position keeps working. The columns added since go
// last: the scheme, a voucher call's channel and the cumulative total
// that keys it (its tx and nonce are empty: it has neither), the
// recipient, the amount in USD, and the payment identifier it was paid
// with.
func csvHeader() []string {
	return []string{"time", "operation", "payer", "amount", "tx", "state", "reason", "asset", "nonce", "resource",
		"scheme", "channel", "cumulative", "pay_to", "amount_usd", "payment_id"}
}

// writeCSV writes both schemes' calls as CSV, in csvHeader's columns.
// The revenue is the rows whose state is settled or charged.
func writeCSV(w io.Writer, es []entry) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(csvHeader())
	for _, e := range es {
		_ = cw.Write([]string{e.At.UTC().Format(time.RFC3339), e.Operation, e.Payer, e.Amount, e.Tx, e.State,
			e.Reason, e.Asset, e.Nonce, e.Resource, e.Scheme, e.Channel, e.Cumulative, e.PayTo, usd(e.Amount), e.PaymentID})
	}
	cw.Flush()
	return cw.Error()
}

// reconcileOnce runs the reconciler once over the data dir's ledger
// against the chain at rpcURL and prints what it resolved.
func reconcileOnce(ctx context.Context, db *store.DB, rpcURL, payTo string, stdout, stderr io.Writer) error {
	if rpcURL == "" {
		return errors.New("ledger reconcile: --chain-rpc (or TOLLGATE_CHAIN_RPC) is required")
	}
	if payTo != "" && !common.IsHexAddress(payTo) {
		return fmt.Errorf("--pay-to %q is not an address", payTo)
	}
	client, err := ethclient.DialContext(ctx, rpcURL)
	if err != nil {
		return fmt.Errorf("chain rpc: %w", err)
	}
	defer client.Close()
	if id, err := client.ChainID(ctx); err != nil || id.Int64() != baseChainID {
		return fmt.Errorf("chain rpc %s: chain id %v (%v); want %d (Base)", redactURL(rpcURL), id, err, baseChainID)
	}
	if d, bound, err := db.Deployment(ctx); err != nil {
		return err
	} else if bound {
		genesis, err := client.HeaderByNumber(ctx, big.NewInt(0))
		if err != nil {
			return fmt.Errorf("chain rpc %s: genesis block: %w", redactURL(rpcURL), err)
		}
		if !strings.EqualFold(genesis.Hash().Hex(), d.Genesis) {
			return fmt.Errorf("ledger reconcile: the store is the ledger of %s, but --chain-rpc serves a chain with genesis %s; reconcile it against its own chain", d, genesis.Hash())
		}
	}
	audit, err := exact.NewAuditor(exact.DefaultAuditConfig(), client)
	if err != nil {
		return err
	}
	rc := exact.DefaultReconcilerConfig()
	rc.MinAge, rc.Batch = 0, 10_000
	if payTo != "" {
		rc.PayTo = common.HexToAddress(payTo)
	}
	r, err := exact.NewReconciler(rc, db, audit, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		return err
	}
	resolved, err := r.Once(ctx)
	for _, res := range resolved {
		fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", strings.ToUpper(res.State), res.Operation, res.Payer, res.Nonce,
			res.Amount, orDash(res.Tx), orDash(res.Reason))
	}
	n, oldest, serr := db.UnresolvedSummary(ctx)
	if serr != nil {
		return serr
	}
	fmt.Fprintf(stdout, "%d resolved; %d still unresolved", len(resolved), n)
	if n > 0 {
		fmt.Fprintf(stdout, " (oldest first seen %s ago)", time.Since(oldest).Round(time.Second))
	}
	fmt.Fprintln(stdout)
	if err != nil {
		return fmt.Errorf("ledger reconcile: some payments could not be checked: %w", err)
	}
	return nil
}

// writeChannels prints the batch-settlement channels (what each charged,
// what is claimed, its deposit, what waits for a claim and since when,
// and a timed withdrawal), their totals, those no longer served and why,
// and the latest claim and settle transactions, newest first. Amounts are
// dollars, with the atomic units beside them.
func writeChannels(w io.Writer, chans []batch.Channel, txs []batch.TxRecord, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHANNEL\tPAYER\tCHARGED\tCLAIMED\tDEPOSIT\tUNCLAIMED\tWAITING\tWITHDRAW REQUESTED")
	unclaimed, waiting := new(big.Int), 0
	var oldest time.Time
	for _, c := range chans {
		charged, claimed := orZeroInt(c.Charged), orZeroInt(c.TotalClaimed)
		open := new(big.Int).Sub(charged, claimed)
		age := "-"
		if open.Sign() > 0 {
			unclaimed.Add(unclaimed, open)
			waiting++
			age = "?" // written before ages were kept
			if !c.UnclaimedSince.IsZero() {
				age = now.Sub(c.UnclaimedSince).Round(time.Second).String()
				if oldest.IsZero() || c.UnclaimedSince.Before(oldest) {
					oldest = c.UnclaimedSince
				}
			}
		} else {
			open.SetInt64(0)
		}
		withdraw := "-"
		if c.WithdrawRequestedAt != 0 {
			withdraw = time.Unix(int64(c.WithdrawRequestedAt), 0).UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.ID.Hex(), c.Config.Payer.Hex(), cell(charged), cell(claimed), cell(orZeroInt(c.Balance)),
			cell(open), age, withdraw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d channels; %s unclaimed on %d of them", len(chans), dollars(unclaimed), waiting)
	if !oldest.IsZero() {
		fmt.Fprintf(w, ", the oldest waiting %s", now.Sub(oldest).Round(time.Second))
	}
	fmt.Fprintln(w)
	for _, c := range chans {
		if !c.StoppedAt.IsZero() {
			fmt.Fprintf(w, "stopped %s: not served since %s on evidence %s: %s\n", c.ID.Hex(), c.StoppedAt.UTC().Format(time.RFC3339), c.StopEvidence, c.StopDetail)
		}
	}
	if len(txs) == 0 {
		msg := "no claim or settle transactions"
		for _, c := range chans {
			if orZeroInt(c.TotalClaimed).Sign() > 0 {
				// A cooperative refund claims what was charged in its own
				// transaction, which the claimer's list does not hold.
				msg = "no claim or settle transactions of the claimer: what is claimed above was claimed by cooperative refunds, each in its refund's transaction"
				break
			}
		}
		_, err := fmt.Fprintln(w, msg)
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tKIND\tRESULT\tTX\tCHANNELS\tAMOUNT\tRECEIVER\tREASON")
	for _, r := range txs {
		tx, receiver, channels := "-", "-", "-"
		if r.Tx != (common.Hash{}) {
			tx = r.Tx.Hex()
		}
		if r.Receiver != (common.Address{}) {
			receiver = r.Receiver.Hex()
		}
		if r.Kind == batch.KindClaim {
			channels = fmt.Sprint(r.Rows)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.At.UTC().Format(time.RFC3339), r.Kind, r.Result, tx, channels,
			cell(orZeroInt(r.Amount)), receiver, orDash(strings.TrimSpace(r.Reason+" "+r.Message)))
	}
	return tw.Flush()
}

func orZeroInt(x *big.Int) *big.Int {
	if x == nil {
		return new(big.Int)
	}
	return x
}
