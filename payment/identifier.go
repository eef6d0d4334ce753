package payment

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	json "github.com/segmentio/encoding/json"
)

// This file is the payment-identifier extension
// (specs/extensions/payment_identifier.md): an idempotency key a client
// keeps across the retries of one purchase, so that a retry with a newly
// signed payment is answered from the record instead of paid again. The
// gate does it for every scheme and both transports, before the scheme
// sees the payment:
//
//   - a new id is reserved (IDBook.ReserveID) for the request and the
//     payload, the payment runs as it would without one, and the id is
//     finished with the payer and the answer when it is delivered, or
//     released when the payment ends any other way;
//   - a known id for the same request, with the very payload first seen
//     or a payment the same payer signed anew (Authenticator: the
//     signature is checked, nothing is settled, charged or consumed), is
//     answered with the recorded answer and its original settlement;
//   - a known id for another request, or signed by another payer, is
//     refused with 409, nothing charged; an id whose first payment is
//     still running, with 409 and Retry-After;
//   - an id that does not follow the extension's format is refused with
//     400 before any payment logic.
//
// Answers are kept IDAnswerFor (the window in which a resent payment
// gets its recorded answer). For IDKeptFor a reuse after the answer's
// window is refused with 409 payment_identifier_expired rather than paid
// again; after that the id is new, its old record replaced. Records stay
// in the books otherwise: the ledger shows each id beside its payment.

// ExtensionPaymentIdentifier is the extension's key in extensions.
const ExtensionPaymentIdentifier = "payment-identifier"

// How long the records of an id serve (see above).
const (
	IDAnswerFor = 10 * time.Minute
	IDKeptFor   = 24 * time.Hour
	// idPendingFor is how long a reservation whose payment never ended
	// (a process that died) holds its id before another request may
	// take it over.
	idPendingFor = 5 * time.Minute
)

// The reasons the extension refuses a payment with.
const (
	ReasonIDInvalid    = "invalid_payment_identifier"
	ReasonIDConflict   = "payment_identifier_conflict"
	ReasonIDInProgress = "payment_identifier_in_progress"
	ReasonIDExpired    = "payment_identifier_expired"
)

// IDReasons are the extension's refusal codes, for the metrics.
func IDReasons() []string {
	return []string{ReasonIDInvalid, ReasonIDConflict, ReasonIDInProgress, ReasonIDExpired}
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{16,128}$`)

// identifierExtension is what every PaymentRequired advertises: the
// extension is optional (info.required false), and its schema.
var identifierExtension = map[string]any{
	"info": map[string]any{"required": false},
	"schema": map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type":    "object",
		"properties": map[string]any{
			"required": map[string]any{"type": "boolean"},
			"id":       map[string]any{"type": "string", "minLength": 16, "maxLength": 128, "pattern": "^[a-zA-Z0-9_-]+$"},
		},
		"required": []string{"required"},
	},
}

// IDRecord is one payment identifier as the books keep it.
type IDRecord struct {
	ID string
	// Operation and Resource are the request the id was first used for
	// (Resource as Exchange.Resource; compared with SameResource).
	Operation, Resource string
	// PayloadHash is the SHA-256 of the first payment's scheme payload,
	// hex: a resend of it is recognised without a signature check.
	PayloadHash string
	// Owner is the reserving request's random token: only it finishes or
	// releases the reservation.
	Owner string
	// Payer, and the answer: empty while the first payment runs.
	Payer       string
	Done        bool
	ContentType string
	Body        []byte
	Settlement  []byte // the SettleResponse's JSON
	// Created is when the id was reserved, Finished when answered.
	Created, Finished time.Time
}

// IDBook keeps payment identifiers, shared by the replicas of one store.
type IDBook interface {
	// ReserveID records r as a pending id unless the id is known: then
	// it returns the record and false. A pending reservation created
	// before stale, or an answered id created before expired, is
	// replaced by r.
	ReserveID(ctx context.Context, r IDRecord, stale, expired time.Time) (IDRecord, bool, error)
	// FinishID stores the payer and the answer of the reservation of
	// r.ID held by r.Owner.
	FinishID(ctx context.Context, r IDRecord) error
	// ReleaseID forgets the reservation of id held by owner.
	ReleaseID(ctx context.Context, id, owner string) error
}

// Authenticator is a Scheme that can say who signed a payment without
// spending it: the signature is checked; nothing is settled, charged,
// reserved or consumed.
type Authenticator interface {
	Payer(x *Exchange) (common.Address, error)
}

// paymentID reads the envelope's payment identifier: "" when it carries
// none, an error when the extension is there with an id that is not one.
func paymentID(env *Envelope) (string, *VerifyError) {
	raw := env.Extensions[ExtensionPaymentIdentifier]
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var ext struct {
		Info *struct {
			ID *json.RawMessage `json:"id"`
		} `json:"info"`
	}
	if err := json.Unmarshal(raw, &ext); err != nil {
		return "", &VerifyError{Reason: ReasonIDInvalid, Message: "extensions[\"payment-identifier\"] is not an object with info: " + err.Error()}
	}
	if ext.Info == nil || ext.Info.ID == nil {
		return "", nil // echoed without an id: the client did not opt in
	}
	var id string
	if err := json.Unmarshal(*ext.Info.ID, &id); err != nil || !idPattern.MatchString(id) {
		return "", &VerifyError{Reason: ReasonIDInvalid, Message: "the payment identifier must be 16 to 128 characters of letters, digits, '-' and '_'"}
	}
	return id, nil
}

// serve hands x to s, through the payment-identifier extension when the
// payment carries an id and the gate keeps them.
func (g *Gate) serve(s Scheme, x *Exchange, id string) {
	if id == "" || g.cfg.IDs == nil {
		s.Serve(x)
		return
	}
	ctx := x.Context()
	now := time.Now()
	sum := sha256.Sum256(x.Envelope.Payload)
	mine := IDRecord{ID: id, Operation: x.Requirement.Operation, Resource: x.Resource(), PayloadHash: hex.EncodeToString(sum[:]),
		Owner: rand.Text(), Created: now}
	known, reserved, err := g.cfg.IDs.ReserveID(ctx, mine, now.Add(-idPendingFor), now.Add(-IDKeptFor))
	if err != nil {
		g.logger.Error("payment identifier: reserve", "id", id, "err", err)
		x.Refuse(http.StatusServiceUnavailable, "ledger_unavailable", "the payment identifier could not be recorded; nothing was charged, retry shortly")
		return
	}
	if reserved {
		x.reply = &idReply{reply: x.reply, g: g, rec: mine}
		s.Serve(x)
		return
	}
	g.known(s, x, known, mine)
}

// known answers a payment whose id is on record: see the file comment.
func (g *Gate) known(s Scheme, x *Exchange, known, mine IDRecord) {
	switch {
	case known.Operation != mine.Operation || !SameResource(known.Resource, mine.Resource):
		x.Refuse(http.StatusConflict, ReasonIDConflict, "this payment identifier was used for another request; use a new identifier for a new purchase")
		return
	case !known.Done:
		if r, ok := x.reply.(interface{ retryAfter(int) }); ok {
			r.retryAfter(2)
		}
		x.Refuse(http.StatusConflict, ReasonIDInProgress, "the first payment with this identifier is still being processed; retry in a few seconds for its answer")
		return
	case time.Since(known.Finished) > IDAnswerFor:
		x.Refuse(http.StatusConflict, ReasonIDExpired, fmt.Sprintf("this payment identifier was answered at %s and its answer is kept %s; use a new identifier to buy again",
			known.Finished.UTC().Format(time.RFC3339), IDAnswerFor))
		return
	}
	if known.PayloadHash != mine.PayloadHash {
		a, ok := s.(Authenticator)
		var payer common.Address
		var err error
		if ok {
			payer, err = a.Payer(x)
		}
		if !ok || err != nil || !strings.EqualFold(payer.Hex(), known.Payer) {
			x.Refuse(http.StatusConflict, ReasonIDConflict, "this payment identifier belongs to another payer's purchase, or this payment's signature could not be checked; nothing was charged")
			return
		}
	}
	var settled SettleResponse
	if err := json.Unmarshal(known.Settlement, &settled); err != nil {
		x.Refuse(http.StatusInternalServerError, ReasonIDConflict, "the recorded answer of this payment identifier cannot be read")
		return
	}
	g.obs.Deduplicated(x.Requirement.Operation, x.Requirement.transport)
	x.Replay(known.ContentType, known.Body, settled)
}

// idReply records the answer of an id's first payment before writing it,
// and releases the id when the payment ends any other way.
type idReply struct {
	reply
	g   *Gate
	rec IDRecord
}

func (r *idReply) release() {
	if err := r.g.cfg.IDs.ReleaseID(context.Background(), r.rec.ID, r.rec.Owner); err != nil {
		r.g.logger.Warn("payment identifier: release", "id", r.rec.ID, "err", err)
	}
}

func (r *idReply) required(v1 RequiredV1, v2 RequiredV2, settlement *SettleResponse) {
	r.release()
	r.reply.required(v1, v2, settlement)
}

func (r *idReply) refused(status int, code, message string) {
	r.release()
	r.reply.refused(status, code, message)
}

func (r *idReply) failure(resp *Response) {
	r.release()
	r.reply.failure(resp)
}

func (r *idReply) paid(resp *Response, s SettleResponse) {
	rec := r.rec
	rec.Payer, rec.Done, rec.ContentType, rec.Body, rec.Finished = s.Payer, true, resp.ContentType(), resp.body, time.Now()
	var err error
	if rec.Settlement, err = json.Marshal(s); err == nil {
		err = r.g.cfg.IDs.FinishID(context.Background(), rec)
	}
	if err != nil {
		// The answer is paid for: it is sent whatever the books say. A
		// retry with this id waits for the reservation to go stale.
		r.g.logger.Error("payment identifier: record the answer", "id", rec.ID, "err", err)
	}
	r.reply.paid(resp, s)
}
