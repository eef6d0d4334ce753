package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/payment/batch"
)

// insertCharge writes c's new charge (a voucher call of the
// batch-settlement scheme) to the books, in the transaction that saves
// the channel: one row in batch_charges, keyed by the channel and the
// cumulative amount it reached, and the operation's paid totals.
func (s *DB) insertCharge(ctx context.Context, tx *sql.Tx, c batch.Channel) error {
	ch := c.NewCharge
	_, err := tx.ExecContext(ctx, `INSERT INTO batch_charges (channel, cumulative, operation, resource, payer, pay_to, asset, amount, charged_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		channelKey(c.ID), decimal(ch.Cumulative), ch.Operation, ch.Resource, strings.ToLower(c.Config.Payer.Hex()),
		strings.ToLower(c.Config.Receiver.Hex()), strings.ToLower(c.Config.Token.Hex()), decimal(ch.Amount), stamp(ch.At))
	if err != nil {
		return fmt.Errorf("store: record charge: %w", err)
	}
	return s.addPaid(ctx, tx, ch.Operation, decimal(ch.Amount))
}
