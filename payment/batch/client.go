package batch

import (
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/payment"
)

// Payer signs a payer's side of the scheme with one EOA key, which is
// both the channel's payer and its payer authorizer (the voucher signer).
type Payer struct {
	Key    *ecdsa.PrivateKey
	Escrow Escrow
}

// Address is the payer's.
func (p Payer) Address() common.Address { return crypto.PubkeyToAddress(p.Key.PublicKey) }

// Channel returns the config and id of the payer's channel to a server's
// terms (salt zero: one channel per payer, receiver, token and delay, as
// the official client does by default).
func (p Payer) Channel(t Terms) (Config, common.Hash) {
	c := Config{Payer: p.Address(), PayerAuthorizer: p.Address(), Receiver: t.Receiver, ReceiverAuthorizer: t.ReceiverAuthorizer,
		Token: t.Token, WithdrawDelay: t.WithdrawDelay}
	return c, p.Escrow.ChannelID(c)
}

// Voucher signs a voucher allowing claims up to max (cumulative) on
// channel id.
func (p Payer) Voucher(id common.Hash, max *big.Int) ([]byte, error) {
	return payment.SignDigest(p.Escrow.VoucherDigest(id, max), p.Key)
}

// DepositRequest is what a deposit payload carries besides its voucher.
type DepositRequest struct {
	Amount      *big.Int
	Token       payment.Domain // the token's EIP-712 domain (name, version, chain, address)
	ValidBefore *big.Int       // unix seconds
	Salt        *big.Int       // fresh per deposit; the ERC-3009 nonce is DepositNonce(channel, Salt)
}

// Payload builds the PaymentPayload.payload of kind typ (TypeVoucher,
// TypeDeposit with dep, TypeRefund with an optional refund amount) for
// the payer's channel to t, with a voucher of max.
func (p Payer) Payload(t Terms, typ string, max *big.Int, dep *DepositRequest, refund *big.Int) ([]byte, error) {
	cfg, id := p.Channel(t)
	sig, err := p.Voucher(id, max)
	if err != nil {
		return nil, err
	}
	w := wirePayload{
		Type: typ,
		ChannelConfig: &wireConfig{Payer: cfg.Payer.Hex(), PayerAuthorizer: cfg.PayerAuthorizer.Hex(), Receiver: cfg.Receiver.Hex(),
			ReceiverAuthorizer: cfg.ReceiverAuthorizer.Hex(), Token: cfg.Token.Hex(),
			WithdrawDelay: json.RawMessage(strconv.FormatUint(cfg.WithdrawDelay, 10)), Salt: cfg.Salt.Hex()},
		Voucher: &wireVoucher{ChannelID: id.Hex(), MaxClaimableAmount: max.String(), Signature: hexutil.Encode(sig)},
	}
	switch typ {
	case TypeDeposit:
		if dep == nil {
			return nil, fmt.Errorf("batch: a deposit payload needs its deposit")
		}
		a := payment.Authorization{From: cfg.Payer, To: ERC3009CollectorAddress, Value: dep.Amount, ValidAfter: new(big.Int),
			ValidBefore: dep.ValidBefore, Nonce: DepositNonce(id, dep.Salt)}
		auth, err := payment.SignDigest(dep.Token.ReceiveDigest(a), p.Key)
		if err != nil {
			return nil, err
		}
		w.Deposit = &wireDeposit{Amount: dep.Amount.String()}
		w.Deposit.Authorization.ERC3009 = &wireERC3009{ValidAfter: "0", ValidBefore: dep.ValidBefore.String(), Salt: common.BigToHash(dep.Salt).Hex(),
			Signature: hexutil.Encode(auth)}
	case TypeRefund:
		if refund != nil {
			w.Amount = refund.String()
		}
	case TypeVoucher:
	default:
		return nil, fmt.Errorf("batch: payload type %q", typ)
	}
	return json.Marshal(w)
}
