package exact

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/payment"
)

// ServerConfig is exact's server side.
type ServerConfig struct {
	// SettleTimeout bounds verify-to-settle work done after the handler.
	SettleTimeout time.Duration
	// Now is the clock authorizations are checked against; nil means
	// time.Now.
	Now func() time.Time
}

// Server is exact's server side, a payment.Scheme (and V1Scheme): it
// claims each authorization in the ledger, has the facilitator verify
// it, runs the handler, settles only a success, confirms the transfer on
// chain, records it with the response and delivers it. A retry of the
// same authorization is answered from the ledger, or from the chain when
// an earlier settlement's outcome was lost; nothing is settled twice.
type Server struct {
	cfg         ServerConfig
	facilitator Facilitator
	ledger      Ledger
	audit       *Auditor // nil: no chain to confirm settlements against
	now         func() time.Time
}

var _ payment.V1Scheme = (*Server)(nil)

// NewServer returns exact's server side; it does no I/O. audit reads
// the chain the payments are made on; with nil, facilitator settlements
// are taken at their word and a lost settlement cannot be found again
// (the caller should say so at startup).
func NewServer(cfg ServerConfig, f Facilitator, l Ledger, audit *Auditor) (*Server, error) {
	if cfg.SettleTimeout <= 0 {
		return nil, errors.New("exact: settle timeout must be positive")
	}
	if f == nil || l == nil {
		return nil, errors.New("exact: a facilitator and a ledger are required")
	}
	s := &Server{cfg: cfg, facilitator: f, ledger: l, audit: audit, now: cfg.Now}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Name implements payment.Scheme.
func (s *Server) Name() string { return Scheme }

// Accepts implements payment.Scheme.
func (s *Server) Accepts(req *payment.Requirement) payment.RequirementsV2 { return Entry(req) }

// AcceptsV1 implements payment.V1Scheme.
func (s *Server) AcceptsV1(req *payment.Requirement) payment.RequirementsV1 { return EntryV1(req) }

// EntryV1 is exact's v1 accepts entry for req, without outputSchema.
func EntryV1(req *payment.Requirement) payment.RequirementsV1 {
	return payment.RequirementsV1{
		Scheme: Scheme, Network: req.NetworkV1, MaxAmountRequired: req.Amount.String(), Resource: req.Resource,
		Description: req.Description, MimeType: req.MimeType, PayTo: req.PayTo.Hex(),
		MaxTimeoutSeconds: req.MaxTimeout, Asset: req.Asset.Hex(),
		Extra: payment.Extra{Name: req.AssetName, Version: req.AssetVersion},
	}
}

// Entry is exact's v2 accepts entry for req.
func Entry(req *payment.Requirement) payment.RequirementsV2 {
	return payment.RequirementsV2{
		Scheme: Scheme, Network: req.Network, Amount: req.Amount.String(), Asset: req.Asset.Hex(),
		PayTo: req.PayTo.Hex(), MaxTimeoutSeconds: req.MaxTimeout, Extra: payment.Extra{Name: req.AssetName, Version: req.AssetVersion},
	}
}

// verifyReasons are what a verification refuses an authorization for:
// the self-hosted facilitator's (Local.Verify) and the remote one's
// default. A settlement checks them again first.
func verifyReasons() []string {
	return []string{ReasonInvalidScheme, ReasonNetworkMismatch, payment.ReasonNoMatch, ReasonRecipientMismatch, ReasonValueMismatch,
		ReasonValidAfter, ReasonValidBefore, ReasonValidityTooLong, ReasonInvalidSignature, ReasonNonceUsed,
		ReasonInsufficientBalance, ReasonSimulationFailed, payment.ReasonUnexpectedVerify}
}

// Reasons implements payment.Scheme. Refused: the payload, our own checks
// (match, the signature), the ledger or the facilitator unavailable, a
// verification's refusal, what the chain shows of a claimed authorization
// (used, canceled, in flight). Failed: a settlement refused (its checks
// again, or reverted), pending, unknown, unconfirmed or unrecorded.
func (s *Server) Reasons() payment.Reasons {
	return payment.Reasons{
		Refused: append([]string{payment.ReasonInvalidPayload, payment.ReasonUnavailable, payment.ReasonBadGateway,
			payment.ReasonPaymentInFlight, ReasonAuthorizationReplayed, ReasonAuthorizationCanceled}, verifyReasons()...),
		Failed: append([]string{ReasonTransactionFailed, payment.ReasonSettlementPending, payment.ReasonSettlementUnknown,
			ReasonSettlementUnconfirmed, payment.ReasonSettlementUnrecorded}, verifyReasons()...),
	}
}

// Serve implements payment.Scheme: the envelope already matched the
// route; the authorization is checked, then served.
func (s *Server) Serve(x *payment.Exchange) {
	p, err := paymentOf(x.Envelope)
	if err != nil {
		// A payload that is not an exact payment at all is a client bug: 400.
		var ve *payment.VerifyError
		errors.As(err, &ve)
		x.Refuse(http.StatusBadRequest, ve.Reason, ve.Message)
		return
	}
	req := x.Requirement
	mismatch := s.match(p, req)
	if mismatch != nil && mismatch.Reason != ReasonValidBefore {
		challenge(x, mismatch)
		return
	}
	// Refuse a signature that is not the payer's before anything is
	// written or asked: junk costs a recovery, not a ledger row.
	if len(p.Signature) == 65 {
		if signer, err := req.Domain().Recover(p.Authorization, p.Signature); err != nil || signer != p.Authorization.From {
			challenge(x, &payment.VerifyError{Reason: ReasonInvalidSignature, Message: "the signature is not from the authorization's from address", Payer: p.Authorization.From.Hex()})
			return
		}
	}
	if mismatch != nil {
		// Expired by our clock: a payment we claimed is still ours to
		// answer (the ledger decides, not the clock); any other is refused.
		s.expired(x, p, mismatch)
		return
	}
	s.serve(x, p)
}

// challenge refuses a presented payment with a 402 saying why.
func challenge(x *payment.Exchange, why *payment.VerifyError) {
	x.Challenge(why.Reason, why.Message, why.Payer, nil, nil)
}

// validitySlack is how much longer than maxTimeoutSeconds an
// authorization may be valid: the payer's clock may run ahead of ours.
const validitySlack = 30

// match checks the authorization against our requirement before anyone
// is asked or anything is written: its recipient, value and time window
// (the facilitator checks them again). Expiry is checked last, so a
// ReasonValidBefore means everything else matched.
func (s *Server) match(p *Payment, req *payment.Requirement) *payment.VerifyError {
	a, now := p.Authorization, s.now().Unix()
	payer := a.From.Hex()
	switch {
	case a.To != req.PayTo:
		return &payment.VerifyError{Reason: ReasonRecipientMismatch, Message: "the authorization pays " + a.To.Hex(), Payer: payer}
	case a.Value.Cmp(req.Amount) != 0:
		return &payment.VerifyError{Reason: ReasonValueMismatch, Message: "the authorization's value is " + a.Value.String(), Payer: payer}
	case a.ValidAfter.Cmp(big.NewInt(now+clockSkew)) > 0:
		return &payment.VerifyError{Reason: ReasonValidAfter, Message: "the authorization is not valid yet", Payer: payer}
	case a.ValidBefore.Cmp(big.NewInt(now+int64(req.MaxTimeout)+validitySlack)) > 0:
		return &payment.VerifyError{Reason: ReasonValidityTooLong, Message: fmt.Sprintf("the authorization is valid until %s; at most maxTimeoutSeconds (%d) + %d s from now is accepted", a.ValidBefore, req.MaxTimeout, validitySlack), Payer: payer}
	case a.ValidBefore.Cmp(big.NewInt(now+6)) < 0:
		return &payment.VerifyError{Reason: ReasonValidBefore, Message: "the authorization is expired or about to", Payer: payer}
	}
	return nil
}

// replayWindow bounds how long after a payment a retry of it is answered
// again from the stored response.
const replayWindow = 10 * time.Minute

// record is the ledger row of a payment for x.
func record(x *payment.Exchange, p *Payment) Record {
	a, req := p.Authorization, x.Requirement
	return Record{
		Network: req.Network, Asset: req.Asset.Hex(), Payer: a.From.Hex(), Nonce: hexutil.Encode(a.Nonce[:]),
		Operation: req.Operation, Resource: x.Resource(), Amount: req.Amount.String(), PayTo: req.PayTo.Hex(), Version: p.Version,
		ValidBefore: clampInt64(a.ValidBefore), ClaimID: newClaimID(), SigHash: sigHash(p),
	}
}

// transfer is what the chain must show for p to have paid req.
func transfer(req *payment.Requirement, p *Payment) Transfer {
	a := p.Authorization
	return Transfer{Asset: req.Asset, From: a.From, To: req.PayTo, Value: req.Amount, Nonce: a.Nonce}
}

// serve runs a matched payment: claim, verify, handler, settle, confirm on
// chain, record, respond.
func (s *Server) serve(x *payment.Exchange, p *Payment) {
	req, logger := x.Requirement, x.Logger()
	a := p.Authorization
	rec := record(x, p)
	// Everything after the handler must survive a client that goes away.
	base := x.Context()
	ctx, cancel := context.WithTimeout(base, s.cfg.SettleTimeout)
	defer cancel()

	claimed, err := s.ledger.Claim(ctx, rec, time.Now().Add(-s.staleAfter()))
	if errors.Is(err, ErrClaimed) {
		s.claimed(x, p, claimed)
		return
	}
	if err != nil {
		logger.ErrorContext(ctx, "ledger claim failed", "err", err)
		x.Refuse(http.StatusServiceUnavailable, payment.ReasonUnavailable, "the payment ledger is unavailable; nothing was charged")
		return
	}
	rec = claimed
	// A key taken over from an unresolved settlement keeps that status on
	// any failure of ours: an earlier transaction may still land.
	unresolved := rec.PrevState == StatePending || rec.PrevState == StateVerified
	fallback, fallbackTx := StateReleased, ""
	if unresolved {
		fallback, fallbackTx = StatePending, rec.PrevTx
	}
	v, err := s.facilitator.Verify(ctx, p, req)
	if err != nil {
		s.finish(ctx, logger, rec, fallback, fallbackTx, payment.ReasonUnexpectedVerify)
		logger.ErrorContext(ctx, "facilitator verify failed", "op", req.Operation, "err", err)
		x.Refuse(http.StatusBadGateway, payment.ReasonBadGateway, "the payment facilitator failed; nothing was charged, retry later")
		return
	}
	// paidTx is set when the chain already shows this authorization paying
	// us: an earlier settlement of ours landed, so nothing is settled again.
	var paidTx common.Hash
	if !v.Valid {
		if !unresolved || s.audit == nil {
			s.finish(ctx, logger, rec, StateFailed, "", v.Reason)
			challenge(x, &payment.VerifyError{Reason: v.Reason, Message: v.Message, Payer: a.From.Hex()})
			return
		}
		// An earlier attempt may have paid (the nonce is then "used"), or
		// the payer may have canceled it: only the chain can say.
		f, err := s.find(ctx, req, p, rec)
		switch {
		case err != nil:
			s.finish(ctx, logger, rec, StatePending, rec.PrevTx, payment.ReasonUnexpectedSettle)
			logger.ErrorContext(ctx, "chain lookup failed", "op", req.Operation, "payer", rec.Payer, "nonce", rec.Nonce, "err", err)
			x.Fail(http.StatusBadGateway, payment.ReasonSettlementUnknown, "the settlement could not be checked on chain; do not sign a new payment: retry this same request later")
			return
		case f.Verdict == VerdictPaid:
			paidTx = f.Tx
		case f.Verdict == VerdictUnused && rec.PrevTx != "":
			s.finish(ctx, logger, rec, StatePending, rec.PrevTx, v.Reason) // the transaction sent earlier may still land
			challenge(x, &payment.VerifyError{Reason: v.Reason, Message: v.Message, Payer: a.From.Hex()})
			return
		default:
			s.refuseFound(ctx, x, rec, f, v.Reason, v.Message)
			return
		}
	}

	x.Verified()
	resp := x.Run()
	if resp.Failed() { // never charge for a failure
		if paidTx != (common.Hash{}) {
			s.resolve(ctx, logger, withOutcome(rec, StateSettled, paidTx.Hex(), "")) // paid earlier; the response is still owed
		} else {
			s.finish(ctx, logger, rec, fallback, fallbackTx, fmt.Sprintf("handler status %d", resp.Status()))
		}
		x.WriteFailure(resp)
		return
	}

	var took time.Duration // settling; 0 when the chain showed it paid already
	if paidTx == (common.Hash{}) {
		start := time.Now()
		var ok bool
		if paidTx, ok = s.settle(x, base, p, rec, unresolved); !ok {
			return
		}
		took = time.Since(start)
	}
	done := withOutcome(rec, StateSettled, paidTx.Hex(), "")
	done.Response, done.ContentType = resp.Body(), resp.ContentType()
	fctx, fcancel := context.WithTimeout(base, 5*time.Second)
	answer, err := s.recordAnswer(fctx, done)
	fcancel()
	if err != nil {
		// Settled on chain but not recorded: the body is not released
		// unrecorded. A retry of the same payment finds the transfer on
		// chain at once and is served.
		logger.ErrorContext(ctx, "settled payment not recorded", "tx", paidTx.Hex(), "payer", rec.Payer, "nonce", rec.Nonce, "err", err)
		x.Fail(http.StatusServiceUnavailable, payment.ReasonSettlementUnrecorded, "paid, but the ledger is unavailable; retry this same request to receive the response")
		return
	}
	logger.InfoContext(ctx, "payment settled", "op", req.Operation, "payer", rec.Payer, "amount", rec.Amount, "tx", paidTx.Hex())
	if answer != nil { // answered, and counted, by the request that recorded first
		replay(x, p, *answer)
		return
	}
	x.Deliver(resp, settled(p, paidTx.Hex()), req.Amount, took)
}

// settled is the settlement header of p paid by transaction tx.
func settled(p *Payment, tx string) payment.SettleResponse {
	return payment.SettleResponse{Transaction: tx, Payer: p.Authorization.From.Hex()}
}

// replay answers p with the response stored in rec.
func replay(x *payment.Exchange, p *Payment, rec Record) {
	x.Replay(rec.ContentType, rec.Response, settled(p, rec.Tx))
}

// recordAnswer stores a settlement with its response. When another request
// stored a response for the same payment first (a retry on another
// replica that found the transfer on chain), that one is the answer and
// is returned, so that one payment is never answered with two different
// bodies; otherwise answer is nil and done's response is the answer.
func (s *Server) recordAnswer(ctx context.Context, done Record) (answer *Record, err error) {
	err = s.ledger.Resolve(ctx, done)
	if !errors.Is(err, ErrAnswered) {
		return nil, err
	}
	stored, err := s.ledger.Lookup(ctx, done)
	if err != nil {
		return nil, err
	}
	return &stored, nil
}

// settle asks the facilitator to settle and establishes the outcome on
// chain: the hash of the transaction that paid us, or false after
// answering the payer and recording why not.
func (s *Server) settle(x *payment.Exchange, base context.Context, p *Payment, rec Record, unresolved bool) (common.Hash, bool) {
	req, logger := x.Requirement, x.Logger()
	payer := p.Authorization.From.Hex()
	sctx, scancel := context.WithTimeout(base, s.cfg.SettleTimeout) // a fresh budget, whatever verify and the handler took
	defer scancel()
	st, err := s.facilitator.Settle(sctx, p, req)
	ctx, cancel := context.WithTimeout(base, s.cfg.SettleTimeout)
	defer cancel()
	switch {
	case err != nil:
		// The transfer may or may not have been sent: look for it once,
		// then record it as unresolved and tell the payer to retry this
		// same payment (a retry re-checks the chain), never to pay again.
		logger.ErrorContext(ctx, "facilitator settle failed", "op", req.Operation, "payer", rec.Payer, "nonce", rec.Nonce, "err", err)
		if f, ferr := s.find(ctx, req, p, rec); ferr == nil && f.Verdict == VerdictPaid {
			return f.Tx, true
		}
		s.finish(ctx, logger, rec, StatePending, "", payment.ReasonUnexpectedSettle)
		x.Fail(http.StatusBadGateway, payment.ReasonSettlementUnknown, "the settlement's outcome is unknown; do not sign a new payment: retry this same request later to receive the response or a final refusal")
		return common.Hash{}, false
	case st.Pending:
		s.finish(ctx, logger, rec, StatePending, st.Tx.Hex(), st.Reason)
		logger.WarnContext(ctx, "settlement pending", "op", req.Operation, "payer", rec.Payer, "nonce", rec.Nonce, "tx", st.Tx.Hex())
		settleFailed(x, p, st)
		return common.Hash{}, false
	case !st.Success:
		logger.WarnContext(ctx, "settlement failed", "op", req.Operation, "payer", rec.Payer, "nonce", rec.Nonce, "reason", st.Reason, "message", st.Message, "tx", txOrEmpty(st.Tx))
		if st.Reason == ReasonNonceUsed || unresolved {
			// Someone used the nonce first (another replica or request
			// settling this same payment, or the payer canceling it).
			if f, ferr := s.find(ctx, req, p, rec); ferr == nil {
				if f.Verdict == VerdictPaid {
					return f.Tx, true
				}
				if f.Verdict != VerdictUnused {
					s.refuseFound(ctx, x, rec, f, st.Reason, st.Message)
					return common.Hash{}, false
				}
			}
		}
		s.finish(ctx, logger, rec, StateFailed, txOrEmpty(st.Tx), st.Reason)
		settleFailed(x, p, st)
		return common.Hash{}, false
	}
	if s.audit == nil {
		return st.Tx, true
	}
	// Never trust the facilitator's word: the receipt must show the
	// token's transfer of this authorization to us (read from the chain,
	// unless the in-process facilitator just read it there).
	var f Finding
	if st.Receipt != nil && st.Receipt.TxHash == st.Tx {
		f = Finding{Verdict: judge(st.Receipt, transfer(req, p)), Tx: st.Tx}
	} else {
		f, err = s.audit.Confirm(ctx, st.Tx, transfer(req, p))
	}
	if err == nil && f.Verdict == VerdictPaid {
		return st.Tx, true
	}
	logger.ErrorContext(ctx, "facilitator reported a settlement the chain does not show", "op", req.Operation, "payer", payer, "nonce", rec.Nonce, "tx", st.Tx.Hex(), "verdict", f.Verdict, "err", err)
	if f, ferr := s.find(ctx, req, p, rec); ferr == nil && f.Verdict == VerdictPaid {
		return f.Tx, true // another transaction did pay: its hash is the real one
	}
	s.finish(ctx, logger, rec, StatePending, "", ReasonSettlementUnconfirmed)
	x.Fail(http.StatusBadGateway, ReasonSettlementUnconfirmed, "the facilitator reported a settlement the chain does not show; do not sign a new payment: retry this same request later")
	return common.Hash{}, false
}

// settleFailed answers a refused or pending settlement: 402, the reason,
// the settlement header (with the tx hash when one was sent), no body.
func settleFailed(x *payment.Exchange, p *Payment, st Settlement) {
	payer := p.Authorization.From.Hex()
	x.Challenge(st.Reason, st.Message, payer, nil, &payment.SettleResponse{ErrorReason: st.Reason, Transaction: txOrEmpty(st.Tx), Payer: payer})
}

// find asks the chain about p, when a chain is configured.
func (s *Server) find(ctx context.Context, req *payment.Requirement, p *Payment, rec Record) (Finding, error) {
	if s.audit == nil {
		return Finding{}, errors.New("no chain to check")
	}
	return s.audit.Find(ctx, transfer(req, p), rec.CreatedAt)
}

// refuseFound records and answers an authorization the chain shows will
// not pay: canceled, used by a transaction that did not pay us, or unused
// (refused for reason, or expired when reason is empty).
func (s *Server) refuseFound(ctx context.Context, x *payment.Exchange, rec Record, f Finding, reason, message string) {
	recorded := reason
	switch {
	case f.Verdict == VerdictCanceled:
		reason, message = ReasonAuthorizationCanceled, "the payer canceled this authorization on chain (transaction "+f.Tx.Hex()+")"
		recorded = reason
	case f.Verdict == VerdictMisused:
		reason, message = ReasonNonceUsed, "the authorization's nonce was used by a transaction that did not pay this resource"
		recorded = reason
	case reason == "":
		reason, message = ReasonValidBefore, "the authorization expired without being used; nothing was paid"
		recorded = ReasonExpiredUnused
	}
	s.resolve(ctx, x.Logger(), withOutcome(rec, StateFailed, txOrEmpty(f.Tx), recorded))
	challenge(x, &payment.VerifyError{Reason: reason, Message: message, Payer: rec.Payer})
}

// staleAfter is how long a verified claim may go without an outcome before
// another request may take it over: the verify and settle budgets and a
// minute for the handler. A retry does not wait for it when the chain
// already tells the outcome (see claimed).
func (s *Server) staleAfter() time.Duration { return 2*s.cfg.SettleTimeout + time.Minute }

// expired answers a payment whose authorization our clock says is
// expired: if the ledger has it, it is answered as a retry of a claimed
// payment; otherwise it is refused.
func (s *Server) expired(x *payment.Exchange, p *Payment, why *payment.VerifyError) {
	ctx, cancel := context.WithTimeout(x.Context(), s.cfg.SettleTimeout)
	defer cancel()
	existing, err := s.ledger.Lookup(ctx, record(x, p))
	switch {
	case errors.Is(err, ErrNotFound):
		challenge(x, why)
	case err != nil:
		x.Logger().ErrorContext(ctx, "ledger lookup failed", "err", err)
		x.Refuse(http.StatusServiceUnavailable, payment.ReasonUnavailable, "the payment ledger is unavailable; nothing was charged")
	case existing.State == StateFailed || existing.State == StateReleased:
		challenge(x, why) // never paid, and now too late to
	default:
		s.claimed(x, p, existing)
	}
}

// claimed answers a payment whose key is already in the ledger and cannot
// be taken over.
//
// Settled: a retry with the very same authorization for the same resource
// gets the stored response again without a second charge (within the
// replay window), or the response it is still owed if none was stored
// (settled from the chain after its answer was lost); anything else is
// refused. Unresolved (verified or pending): the chain decides at once —
// a transfer to us is served, a cancellation or an expiry is refused, an
// unused authorization still valid is in flight elsewhere.
func (s *Server) claimed(x *payment.Exchange, p *Payment, existing Record) {
	ctx, cancel := context.WithTimeout(x.Context(), s.cfg.SettleTimeout)
	defer cancel()
	logger := x.Logger()
	same := existing.SigHash == sigHash(p) && payment.SameResource(existing.Resource, x.Resource())
	switch {
	case existing.State == StateSettled && same && existing.Response != nil && time.Since(existing.UpdatedAt) < replayWindow:
		replay(x, p, existing)
	case existing.State == StateSettled && same && existing.Response == nil:
		s.serveOwed(ctx, x, p, existing, common.HexToHash(existing.Tx))
	case existing.State == StateSettled:
		challenge(x, &payment.VerifyError{Reason: ReasonAuthorizationReplayed, Message: "this authorization already paid for " + existing.Resource, Payer: existing.Payer})
	case (existing.State == StateVerified || existing.State == StatePending) && s.audit != nil:
		f, err := s.find(ctx, x.Requirement, p, existing)
		switch {
		case err != nil:
			logger.ErrorContext(ctx, "chain lookup failed", "payer", existing.Payer, "nonce", existing.Nonce, "err", err)
			x.Fail(http.StatusBadGateway, payment.ReasonSettlementUnknown, "the settlement could not be checked on chain; do not sign a new payment: retry this same request later")
		case f.Verdict == VerdictPaid && same:
			s.serveOwed(ctx, x, p, existing, f.Tx)
		case f.Verdict == VerdictPaid:
			s.resolve(ctx, logger, withOutcome(existing, StateSettled, f.Tx.Hex(), ""))
			challenge(x, &payment.VerifyError{Reason: ReasonAuthorizationReplayed, Message: "this authorization already paid for " + existing.Resource, Payer: existing.Payer})
		case f.Verdict != VerdictUnused || f.Expired(existing.ValidBefore):
			s.refuseFound(ctx, x, existing, f, "", "")
		default:
			challenge(x, &payment.VerifyError{Reason: payment.ReasonPaymentInFlight, Message: "this payment is being processed by another request; retry this same request in a few seconds", Payer: existing.Payer})
		}
	default:
		challenge(x, &payment.VerifyError{Reason: payment.ReasonPaymentInFlight, Message: "this payment is already being processed by another request", Payer: existing.Payer})
	}
}

// serveOwed answers a payment the chain shows settled (transaction tx)
// whose response was never delivered: it runs the handler, records the
// settlement with the response, and delivers it. A failing handler
// leaves the settlement recorded without a response, still owed.
func (s *Server) serveOwed(ctx context.Context, x *payment.Exchange, p *Payment, rec Record, tx common.Hash) {
	logger := x.Logger()
	resp := x.Run()
	done := withOutcome(rec, StateSettled, tx.Hex(), "")
	if resp.Failed() {
		s.resolve(ctx, logger, done)
		x.WriteFailure(resp)
		return
	}
	done.Response, done.ContentType = resp.Body(), resp.ContentType()
	answer, err := s.recordAnswer(ctx, done)
	if err != nil {
		logger.ErrorContext(ctx, "settled payment not recorded", "tx", tx.Hex(), "payer", rec.Payer, "nonce", rec.Nonce, "err", err)
		x.Fail(http.StatusServiceUnavailable, payment.ReasonSettlementUnrecorded, "paid, but the ledger is unavailable; retry this same request to receive the response")
		return
	}
	if answer != nil {
		replay(x, p, *answer)
		return
	}
	logger.InfoContext(ctx, "settled payment served on retry", "payer", rec.Payer, "nonce", rec.Nonce, "tx", tx.Hex())
	x.Deliver(resp, settled(p, tx.Hex()), x.Requirement.Amount, 0)
}

// finish records an outcome decided by the claim's holder. It has its
// own deadline: the request's may be what just ran out, and an outcome
// left unrecorded blocks the claim.
func (s *Server) finish(ctx context.Context, logger *slog.Logger, rec Record, state, tx, reason string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.ledger.Finish(ctx, withOutcome(rec, state, tx, reason)); err != nil {
		logger.ErrorContext(ctx, "ledger finish failed", "state", state, "payer", rec.Payer, "nonce", rec.Nonce, "err", err)
	}
}

// resolve records an outcome the chain established.
func (s *Server) resolve(ctx context.Context, logger *slog.Logger, rec Record) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.ledger.Resolve(ctx, rec); err != nil && !errors.Is(err, ErrLostClaim) {
		logger.ErrorContext(ctx, "ledger resolve failed", "state", rec.State, "payer", rec.Payer, "nonce", rec.Nonce, "err", err)
	}
}

func withOutcome(rec Record, state, tx, reason string) Record {
	rec.State, rec.Tx, rec.Reason = state, tx, reason
	return rec
}

func txOrEmpty(h common.Hash) string {
	if h == (common.Hash{}) {
		return ""
	}
	return h.Hex()
}

func newClaimID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sigHash identifies an authorization's exact signature and value.
func sigHash(p *Payment) string {
	return crypto.Keccak256Hash(p.Signature, p.Authorization.Value.Bytes()).Hex()
}

func clampInt64(v *big.Int) int64 {
	if v.IsInt64() {
		return v.Int64()
	}
	return 1<<63 - 1
}

// Payer implements payment.Authenticator: the payer of x's payment when
// its authorization pays our requirement and is signed by its from
// address (an EOA's signature; a smart wallet's is not checked here).
// Nothing is verified with the facilitator, settled or recorded.
func (s *Server) Payer(x *payment.Exchange) (common.Address, error) {
	p, err := paymentOf(x.Envelope)
	if err != nil {
		return common.Address{}, err
	}
	a, req := p.Authorization, x.Requirement
	if a.To != req.PayTo || a.Value.Cmp(req.Amount) != 0 {
		return common.Address{}, errors.New("exact: the authorization does not pay the requirement")
	}
	if signer, err := req.Domain().Recover(a, p.Signature); err != nil || signer != a.From {
		return common.Address{}, errors.New("exact: the signature is not the authorization's from address's")
	}
	return a.From, nil
}
