package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/store"
)

// claimerLease is the store lease under which one replica claims.
const claimerLease = "batch-claimer"

// batchKey reads the receiver authorizer's key: TOLLGATE_BATCH_AUTHORIZER_KEY,
// the key file, or in devnet mode payTo's test key (the same on every
// replica of a shared devnet, as channels name it). Empty: none.
func batchKey(cfg *config, devnetMode bool) (string, error) {
	switch {
	case cfg.BatchAuthorizerKey != "":
		return cfg.BatchAuthorizerKey, nil
	case cfg.BatchKeyFile != "":
		b, err := os.ReadFile(cfg.BatchKeyFile)
		if err != nil {
			return "", fmt.Errorf("batch authorizer key file: %w", err)
		}
		return string(b), nil
	case devnetMode:
		k, err := devnet.DeriveKey(devnet.Mnemonic, devnet.PayToAccount)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%x", crypto.FromECDSA(k)), nil
	}
	return "", nil
}

// batchSide is the batch-settlement scheme of a serve: its server side in
// the gate and the claimer behind it.
type batchSide struct {
	scheme  *batch.Server
	claimer *batch.Claimer
	watcher *batch.Watcher
}

// batchObserver counts the claimer's transactions, the escrow watcher's
// passes and the channels stopped (by the server, the claimer and the
// watcher); *admin.Metrics is one.
type batchObserver interface {
	batch.ClaimObserver
	batch.WatchObserver
	// BatchStopEvidences exposes the stops of each evidence at zero.
	BatchStopEvidences(evidences ...string)
}

// newBatchSide builds the scheme over the store and the facilitator of
// pay, or returns nil when it is not offered.
func newBatchSide(cfg *config, pay *payments, db *store.DB, observer batchObserver, logger *slog.Logger) (*batchSide, error) {
	if !cfg.BatchSettlement {
		return nil, nil
	}
	if cfg.DevnetURL != "" && cfg.Database == "" {
		// A server with books of its own serves only the channels it
		// opened (docs/batch-settlement.md, "Servers with separate
		// books"): replicas behind one balancer should share a store.
		logger.Info("batch-settlement books are this server's own (--data-dir): channels opened at another server on this chain are refused here, " +
			"not served twice; replicas behind one balancer share a PostgreSQL store (--database)")
	}
	keyHex, err := batchKey(cfg, pay.mode == "devnet")
	if err != nil {
		return nil, err
	}
	if keyHex == "" {
		logger.Warn("batch-settlement is not offered: no receiver authorizer key (TOLLGATE_BATCH_AUTHORIZER_KEY or --batch-authorizer-key-file); --batch-settlement=false silences this")
		return nil, nil
	}
	if pay.batch == nil {
		logger.Warn("batch-settlement is not offered: the facilitator does not support it")
		return nil, nil
	}
	key, err := crypto.HexToECDSA(strings.TrimPrefix(strings.TrimSpace(keyHex), "0x"))
	if err != nil {
		return nil, errors.New("the batch receiver authorizer key is not a hex secp256k1 key")
	}
	escrow := batch.Escrow{ChainID: big.NewInt(baseChainID), Address: batch.EscrowAddress}
	minDeposit, _ := payment.AtomicAmount(cfg.BatchMinDeposit, pay.gateConfig.Decimals)
	threshold, err := claimThreshold(cfg.BatchClaimThreshold, pay.gateConfig.Decimals) // nil: no threshold
	if err != nil {
		return nil, fmt.Errorf("--batch-claim-threshold %q: %w", cfg.BatchClaimThreshold, err)
	}
	scheme, err := batch.NewServer(batch.ServerConfig{Escrow: escrow, Authorizer: key,
		WithdrawDelay: uint64(cfg.BatchWithdrawDelay / time.Second), MinDeposit: minDeposit, StateTTL: cfg.BatchStateTTL, Observer: observer}, db, pay.batch)
	if err != nil {
		return nil, err
	}
	if observer != nil {
		observer.BatchStopEvidences(batch.Evidences()...)
	}
	cc := batch.ClaimerConfig{Escrow: escrow, Authorizer: key, Period: cfg.BatchClaimInterval, Threshold: threshold,
		Poll: min(cfg.BatchClaimInterval, time.Second), Decimals: pay.gateConfig.Decimals, Observer: observer}
	// A claim counts as far as the escrow shows it: the claimer reads the
	// claimed totals after each claim where the facilitator can read the
	// chain; otherwise it takes the facilitator's word, and the escrow
	// watcher's Claimed events are the check.
	if r, ok := pay.batch.(batch.ChannelReader); ok {
		cc.Chain = r
	} else {
		logger.Info("batch-settlement claims are counted on the facilitator's word; the escrow watcher checks them against the escrow's Claimed events")
	}
	if cfg.Database != "" { // replicas take turns: one claims per lease period
		holder := replicaName()
		cc.Turn = func(ctx context.Context) (bool, error) { return db.Lease(ctx, claimerLease, holder, 30*time.Second) }
	}
	claimer, err := batch.NewClaimer(cc, db, pay.batch, logger.With("component", "claimer"))
	if err != nil {
		return nil, err
	}
	// The watcher looks back over a whole withdraw delay of 2 s blocks: a
	// withdrawal started while no replica watched is still seen in time.
	wc := batch.WatcherConfig{Escrow: escrow.Address, Poll: 2 * time.Second, Turn: cc.Turn,
		Lookback: uint64(cfg.BatchWithdrawDelay/(2*time.Second)) + 1, OnWithdraw: func(common.Hash) { claimer.Wake() }, Observer: observer}
	watcher, err := batch.NewWatcher(wc, pay.logs, db, logger.With("component", "escrow-watcher"))
	if err != nil {
		return nil, err
	}
	logger.Info("batch-settlement offered beside exact", "escrow", escrow.Address.Hex(), "receiver_authorizer", scheme.ReceiverAuthorizer().Hex(),
		"withdraw_delay", cfg.BatchWithdrawDelay, "claim_interval", cfg.BatchClaimInterval, "claim_threshold_usd", cfg.BatchClaimThreshold)
	return &batchSide{scheme: scheme, claimer: claimer, watcher: watcher}, nil
}
