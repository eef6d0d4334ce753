package devnet_test

import (
	"bytes"
	"context"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
)

// The EIP-712 type strings of the batch-settlement escrow and of the
// deposit authorization (docs/batch-settlement.md §1.2).
const (
	channelConfigType = "ChannelConfig(address payer,address payerAuthorizer,address receiver,address receiverAuthorizer,address token,uint40 withdrawDelay,bytes32 salt)"
	voucherType       = "Voucher(bytes32 channelId,uint128 maxClaimableAmount)"
	refundType        = "Refund(bytes32 channelId,uint256 nonce,uint128 amount)"
	claimEntryType    = "ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)"
	claimBatchType    = "ClaimBatch(ClaimEntry[] claims)" + claimEntryType
	receiveAuthType   = "ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
	eip712DomainType  = "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
)

var (
	escrowAddr    = common.HexToAddress(devnet.BatchSettlementAddress)
	collectorAddr = common.HexToAddress(devnet.ERC3009DepositCollectorAddress)
	multicallAddr = common.HexToAddress(devnet.Multicall3Address)
)

// channelConfig, voucher and voucherClaim are the escrow's ABI tuples, in
// the shape go-ethereum's abi package packs (fields by component name).
type channelConfig struct {
	Payer              common.Address
	PayerAuthorizer    common.Address
	Receiver           common.Address
	ReceiverAuthorizer common.Address
	Token              common.Address
	WithdrawDelay      *big.Int // uint40
	Salt               [32]byte
}

type voucher struct {
	Channel            channelConfig
	MaxClaimableAmount *big.Int
}

type voucherClaim struct {
	Voucher      voucher
	Signature    []byte
	TotalClaimed *big.Int
}

func word(b []byte) []byte { return common.LeftPadBytes(b, 32) }

func uword(v uint64) []byte { return word(new(big.Int).SetUint64(v).Bytes()) }

// domainSeparator is an EIP-712 separator of name, version, the devnet's
// chain id and a verifying contract, by hand.
func domainSeparator(name, version string, contract common.Address) common.Hash {
	return crypto.Keccak256Hash(crypto.Keccak256([]byte(eip712DomainType)), crypto.Keccak256([]byte(name)),
		crypto.Keccak256([]byte(version)), uword(devnet.ChainID), word(contract[:]))
}

func typedDigest(separator common.Hash, structHash []byte) common.Hash {
	return crypto.Keccak256Hash([]byte{0x19, 0x01}, separator[:], structHash)
}

func escrowDigest(structHash []byte) common.Hash {
	return typedDigest(domainSeparator(devnet.BatchSettlementName, devnet.BatchSettlementVersion, escrowAddr), structHash)
}

// channelID is the EIP-712 digest of the channel's configuration.
func channelID(c channelConfig) common.Hash {
	return escrowDigest(crypto.Keccak256(crypto.Keccak256([]byte(channelConfigType)), word(c.Payer[:]), word(c.PayerAuthorizer[:]),
		word(c.Receiver[:]), word(c.ReceiverAuthorizer[:]), word(c.Token[:]), word(c.WithdrawDelay.Bytes()), c.Salt[:]))
}

func voucherDigest(id common.Hash, max *big.Int) common.Hash {
	return escrowDigest(crypto.Keccak256(crypto.Keccak256([]byte(voucherType)), id[:], word(max.Bytes())))
}

func refundDigest(id common.Hash, nonce, amount *big.Int) common.Hash {
	return escrowDigest(crypto.Keccak256(crypto.Keccak256([]byte(refundType)), id[:], word(nonce.Bytes()), word(amount.Bytes())))
}

func claimBatchDigest(rows []voucherClaim) common.Hash {
	var entries []byte
	for _, r := range rows {
		id := channelID(r.Voucher.Channel)
		entries = append(entries, crypto.Keccak256(crypto.Keccak256([]byte(claimEntryType)), id[:],
			word(r.Voucher.MaxClaimableAmount.Bytes()), word(r.TotalClaimed.Bytes()))...)
	}
	return escrowDigest(crypto.Keccak256(crypto.Keccak256([]byte(claimBatchType)), crypto.Keccak256(entries)))
}

// depositNonce is the ERC-3009 nonce that binds a deposit to a channel.
func depositNonce(id common.Hash, salt *big.Int) common.Hash {
	return crypto.Keccak256Hash(id[:], word(salt.Bytes()))
}

func sign(t *testing.T, digest common.Hash, a devnet.Account) []byte {
	t.Helper()
	sig, err := crypto.Sign(digest[:], a.Key)
	if err != nil {
		t.Fatal(err)
	}
	sig[64] += 27
	return sig
}

// vectorConfig is the channel of docs/batch-settlement.md's test vectors.
func vectorConfig() channelConfig {
	return channelConfig{
		Payer: common.HexToAddress("0x1111111111111111111111111111111111111111"), PayerAuthorizer: common.HexToAddress("0x1111111111111111111111111111111111111111"),
		Receiver: common.HexToAddress("0x2222222222222222222222222222222222222222"), ReceiverAuthorizer: common.HexToAddress("0x3333333333333333333333333333333333333333"),
		Token: common.HexToAddress("0x4444444444444444444444444444444444444444"), WithdrawDelay: big.NewInt(900),
	}
}

// Test vectors of docs/batch-settlement.md §1.2 (computed there with viem
// and @x402/evm's computeChannelId).
const (
	vectorSeparator  = "0xd8d982716899b0e20cf2c1e706a37b8a892c83fdd4ac9b540cfeec11f9c73a39"
	vectorChannelID  = "0x8ea4b277c96d508b2d34b4f68ed56a23326b1e86baadcc7dd94a251cab3ec016"
	vectorVoucher    = "0x06b733fd752cc6c2cfebca9a07f533f8c3e8c70eaac4860b537d7739742b85eb"
	vectorRefund     = "0x218ea5f4c703495e7def20b81df9bd0c350d2f97bc04551faf7c8d06146ad05b"
	vectorClaimBatch = "0x9084d23a756eef6cb33d0e8d6cc322f137cd22c5b420285e3cee2d8b4ce552d8"
	vectorNonce      = "0x6a978793d96dcb65c35d3d86b10ca53507fe16a47fd6cb12296edd41735ff284"
)

// typedData builds the apitypes form of one escrow struct, to check the
// hand-written hashing against go-ethereum's EIP-712 encoder.
func typedData(primary string, msg apitypes.TypedDataMessage) apitypes.TypedData {
	return apitypes.TypedData{
		Types: apitypes.Types{
			"EIP712Domain": {{Name: "name", Type: "string"}, {Name: "version", Type: "string"}, {Name: "chainId", Type: "uint256"}, {Name: "verifyingContract", Type: "address"}},
			"ChannelConfig": {{Name: "payer", Type: "address"}, {Name: "payerAuthorizer", Type: "address"}, {Name: "receiver", Type: "address"},
				{Name: "receiverAuthorizer", Type: "address"}, {Name: "token", Type: "address"}, {Name: "withdrawDelay", Type: "uint40"}, {Name: "salt", Type: "bytes32"}},
			"Voucher":    {{Name: "channelId", Type: "bytes32"}, {Name: "maxClaimableAmount", Type: "uint128"}},
			"Refund":     {{Name: "channelId", Type: "bytes32"}, {Name: "nonce", Type: "uint256"}, {Name: "amount", Type: "uint128"}},
			"ClaimEntry": {{Name: "channelId", Type: "bytes32"}, {Name: "maxClaimableAmount", Type: "uint128"}, {Name: "totalClaimed", Type: "uint128"}},
			"ClaimBatch": {{Name: "claims", Type: "ClaimEntry[]"}},
		},
		PrimaryType: primary,
		Domain: apitypes.TypedDataDomain{Name: devnet.BatchSettlementName, Version: devnet.BatchSettlementVersion,
			ChainId: (*math.HexOrDecimal256)(big.NewInt(devnet.ChainID)), VerifyingContract: devnet.BatchSettlementAddress},
		Message: msg,
	}
}

// TestBatchSettlementVectors checks the EIP-712 typehashes, the domain,
// the channel id, the voucher, refund and claim-batch digests and the
// deposit nonce against the research note's vectors, each computed by hand
// and, for the typed data, by go-ethereum's apitypes.
func TestBatchSettlementVectors(t *testing.T) {
	t.Parallel()
	c := vectorConfig()
	id := channelID(c)
	rows := []voucherClaim{{Voucher: voucher{Channel: c, MaxClaimableAmount: big.NewInt(1000)}, TotalClaimed: big.NewInt(700)}}
	idHex := id.Hex()
	for _, tc := range []struct {
		name, want string
		hand       []byte
		typed      *apitypes.TypedData
	}{
		{"ChannelConfig typehash", "0x1c9a06ceab9b0ebbd3301dc56c9111bb6d9af421356dc9ccb3b7084c755db308", crypto.Keccak256([]byte(channelConfigType)), nil},
		{"Voucher typehash", "0x1e1bd6ff84c3e0d9029a292b212e039c0ca97ec497c55191a4a5874294609a69", crypto.Keccak256([]byte(voucherType)), nil},
		{"Refund typehash", "0xbe23ad087435072cd69b49cc5b92de10ee610fce7ae0ab428307972d764bb216", crypto.Keccak256([]byte(refundType)), nil},
		{"ClaimEntry typehash", "0x30b9a0367528fca13c3e8ec6134c3113f1887ebe7a1ad61de0955aac288b0cf5", crypto.Keccak256([]byte(claimEntryType)), nil},
		{"ClaimBatch typehash", "0x42bd57c010b870c2e96203c66341f28a6a19b4d56a74533a8eb5f706b9fd6d57", crypto.Keccak256([]byte(claimBatchType)), nil},
		{"ReceiveWithAuthorization typehash", "0xd099cc98ef71107a616c4f0f941f04c322d8e254fe26b3c6668db87aae413de8", crypto.Keccak256([]byte(receiveAuthType)), nil},
		{"domain separator", vectorSeparator, domainSeparator(devnet.BatchSettlementName, devnet.BatchSettlementVersion, escrowAddr).Bytes(), nil},
		{"channel id", vectorChannelID, id.Bytes(), &[]apitypes.TypedData{typedData("ChannelConfig", apitypes.TypedDataMessage{
			"payer": c.Payer.Hex(), "payerAuthorizer": c.PayerAuthorizer.Hex(), "receiver": c.Receiver.Hex(), "receiverAuthorizer": c.ReceiverAuthorizer.Hex(),
			"token": c.Token.Hex(), "withdrawDelay": "900", "salt": hexutil.Encode(c.Salt[:])})}[0]},
		{"voucher digest", vectorVoucher, voucherDigest(id, big.NewInt(1000)).Bytes(), &[]apitypes.TypedData{typedData("Voucher", apitypes.TypedDataMessage{
			"channelId": idHex, "maxClaimableAmount": "1000"})}[0]},
		{"refund digest", vectorRefund, refundDigest(id, big.NewInt(0), big.NewInt(500)).Bytes(), &[]apitypes.TypedData{typedData("Refund", apitypes.TypedDataMessage{
			"channelId": idHex, "nonce": "0", "amount": "500"})}[0]},
		{"claim batch digest", vectorClaimBatch, claimBatchDigest(rows).Bytes(), &[]apitypes.TypedData{typedData("ClaimBatch", apitypes.TypedDataMessage{
			"claims": []any{map[string]any{"channelId": idHex, "maxClaimableAmount": "1000", "totalClaimed": "700"}}})}[0]},
		{"deposit nonce", vectorNonce, depositNonce(id, big.NewInt(1)).Bytes(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := hexutil.Encode(tc.hand); got != tc.want {
				t.Errorf("by hand %s, want %s", got, tc.want)
			}
			if tc.typed == nil {
				return
			}
			h, _, err := apitypes.TypedDataAndHash(*tc.typed)
			if err != nil {
				t.Fatal(err)
			}
			if got := hexutil.Encode(h); got != tc.want {
				t.Errorf("apitypes %s, want %s", got, tc.want)
			}
		})
	}
}

// TestBatchSettlementABI checks every function selector, event topic and
// error selector of the compiled contracts against the values the research
// note computed from the official ABI (docs/batch-settlement.md §1.3-1.4),
// and the token's receiveWithAuthorization overload the collector calls.
func TestBatchSettlementABI(t *testing.T) {
	t.Parallel()
	type entry struct{ kind, sig, want string }
	contracts := map[string][]entry{
		"x402BatchSettlement": {
			{"function", "channels(bytes32)", "0x7a7ebd7b"},
			{"function", "pendingWithdrawals(bytes32)", "0xb7f06ebe"},
			{"function", "refundNonce(bytes32)", "0xf0dc792e"},
			{"function", "receivers(address,address)", "0x21ff6389"},
			{"function", "MIN_WITHDRAW_DELAY()", "0xae159439"},
			{"function", "MAX_WITHDRAW_DELAY()", "0x1fc3277d"},
			{"function", "CHANNEL_CONFIG_TYPEHASH()", "0x8e4a68ac"},
			{"function", "VOUCHER_TYPEHASH()", "0x94739e87"},
			{"function", "REFUND_TYPEHASH()", "0x1e69ef40"},
			{"function", "CLAIM_ENTRY_TYPEHASH()", "0xba94ec0d"},
			{"function", "CLAIM_BATCH_TYPEHASH()", "0x53ab0fae"},
			{"function", "getChannelId((address,address,address,address,address,uint40,bytes32))", "0x5e5e0b87"},
			{"function", "getVoucherDigest(bytes32,uint128)", "0x862bb199"},
			{"function", "getRefundDigest(bytes32,uint256,uint128)", "0xe25cf189"},
			{"function", "getClaimBatchDigest((((address,address,address,address,address,uint40,bytes32),uint128),bytes,uint128)[])", "0x488ccc3b"},
			{"function", "eip712Domain()", "0x84b0196e"},
			{"function", "deposit((address,address,address,address,address,uint40,bytes32),uint128,address,bytes)", "0x140f1e75"},
			{"function", "claim((((address,address,address,address,address,uint40,bytes32),uint128),bytes,uint128)[])", "0x29237b0c"},
			{"function", "claimWithSignature((((address,address,address,address,address,uint40,bytes32),uint128),bytes,uint128)[],bytes)", "0xe43ce1f2"},
			{"function", "settle(address,address)", "0x9db32a8f"},
			{"function", "initiateWithdraw((address,address,address,address,address,uint40,bytes32),uint128)", "0xcf5cf3dc"},
			{"function", "finalizeWithdraw((address,address,address,address,address,uint40,bytes32))", "0xe88377b1"},
			{"function", "refund((address,address,address,address,address,uint40,bytes32),uint128)", "0xdce4bfae"},
			{"function", "refundWithSignature((address,address,address,address,address,uint40,bytes32),uint128,uint256,bytes)", "0xb77433e9"},
			{"function", "multicall(bytes[])", "0xac9650d8"},
			{"event", "ChannelCreated(bytes32,(address,address,address,address,address,uint40,bytes32))", "0x69d8248d5566bdb2ebc4d218970710d8378a2ff9b709a999e052b71970f808fa"},
			{"event", "ChannelClosed(bytes32,(address,address,address,address,address,uint40,bytes32))", "0x8d5942f197f362dfd44dfdc1b0b7a9721c9151b67f55817c83349271d3c08d37"},
			{"event", "Deposited(bytes32,address,uint128,uint128)", "0x6c2a09353b5e75e70d0b9778b80a413809bb235d46c211811c474b3346791d89"},
			{"event", "Claimed(bytes32,address,uint128,uint128)", "0x36bd546bb573e8921fdbfd934bbed62d872796b01792cd240cce27f79dd3eddd"},
			{"event", "Settled(address,address,address,uint128)", "0x7337b4386b690fdb8ba66905b92b9d45d33bc6626ee2620c905fb150ec0cc47d"},
			{"event", "Refunded(bytes32,address,uint128)", "0xa84286cf8ebc7903a663c77c8d99aa92b600d4c2fcca872a5d4a663db4eb394b"},
			{"event", "WithdrawInitiated(bytes32,uint128,uint40)", "0xe4280d0d903c7f258f62b07c62f262377cbaa23f7791d78126e6446e0f0e3c23"},
			{"event", "WithdrawFinalized(bytes32,address,uint128)", "0x546ce1e2242cd930c196bd08b894443562d709b4fffe4f028a75a6d233efc6e3"},
			{"error", "InvalidChannel()", "0xea3a9a39"}, {"error", "ZeroDeposit()", "0x56316e87"}, {"error", "DepositOverflow()", "0x1132981b"},
			{"error", "InvalidSignature()", "0x8baa579f"}, {"error", "NotReceiverAuthorizer()", "0xf5e2237d"}, {"error", "NotAuthorizedToClaim()", "0xdefb7069"},
			{"error", "NotAuthorizedToRefund()", "0x7864f008"}, {"error", "ClaimExceedsCeiling()", "0xf1789775"}, {"error", "ClaimExceedsBalance()", "0x7d8242b6"},
			{"error", "WithdrawalAlreadyPending()", "0xa2aed0f0"}, {"error", "WithdrawalNotPending()", "0x3a0a1ca6"},
			{"error", "NotAuthorizedToFinalizeWithdraw()", "0x15f969d5"}, {"error", "WithdrawDelayNotElapsed()", "0xf3965827"},
			{"error", "NothingToWithdraw()", "0xd0d04f60"}, {"error", "WithdrawAmountExceedsAvailable()", "0x6d3d5764"},
			{"error", "WithdrawDelayOutOfRange()", "0x4574fab6"}, {"error", "EmptyBatch()", "0xc2e5347d"}, {"error", "DepositCollectionFailed()", "0xeb43592c"},
			{"error", "InvalidCollector()", "0x18b1afd4"}, {"error", "InvalidRefundNonce()", "0x164f1afe"}, {"error", "ZeroRefund()", "0xd758525c"},
			{"error", "ReentrancyGuardReentrantCall()", "0x3ee5aeb5"},
		},
		"ERC3009DepositCollector": {
			{"function", "collect(address,address,uint256,bytes32,bytes)", "0xe416d8d3"},
			{"function", "x402BatchSettlement()", "0x4dec6d95"},
			{"error", "OnlyX402BatchSettlement()", "0x9794beb9"},
		},
		"USDToken": {
			{"function", "receiveWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)", "0x88b7ab63"},
		},
		"Multicall3": {
			{"function", "tryAggregate(bool,(address,bytes)[])", "0xbce38bd7"},
			{"function", "aggregate((address,bytes)[])", "0x252dba42"},
			{"function", "aggregate3((address,bool,bytes)[])", "0x82ad56cb"},
			{"function", "getEthBalance(address)", "0x4d2301cc"},
			{"function", "getBlockNumber()", "0x42cbb15c"},
			{"function", "getCurrentBlockTimestamp()", "0x0f28c97d"},
			{"function", "getChainId()", "0x3408e470"},
		},
	}
	for name, entries := range contracts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, parsed, err := devnet.LoadArtifact(name)
			if err != nil {
				t.Fatal(err)
			}
			sigs := map[string]string{}
			for _, m := range parsed.Methods {
				sigs["function "+m.Sig] = hexutil.Encode(m.ID)
			}
			for _, e := range parsed.Events {
				sigs["event "+e.Sig] = e.ID.Hex()
			}
			for _, e := range parsed.Errors {
				sigs["error "+e.Sig] = hexutil.Encode(e.ID[:4])
			}
			for _, e := range entries {
				got, ok := sigs[e.kind+" "+e.sig]
				if !ok {
					t.Errorf("no %s %s in the ABI", e.kind, e.sig)
					continue
				}
				h := crypto.Keccak256([]byte(e.sig))
				computed := hexutil.Encode(h[:4])
				if e.kind == "event" {
					computed = hexutil.Encode(h)
				}
				if got != e.want || computed != e.want {
					t.Errorf("%s %s: ABI %s, keccak %s, want %s", e.kind, e.sig, got, computed, e.want)
				}
			}
		})
	}
}

// batchEnv is a devnet with the escrow, collector, Multicall3 and token
// ABIs, and one channel: payer #0 (its own payer authorizer), receiver
// #1 (payTo), receiver authorizer #2; relayer #9 sends what anyone may.
type batchEnv struct {
	chain                                *devnet.Chain
	client                               batchClient
	backend                              batchBackend
	escrow, collector, multicall, token  abi.ABI
	payer, receiver, authorizer, relayer devnet.Account
	stranger                             devnet.Account
}

// batchClient reads the chain (an *ethclient.Client or a simulated
// backend's client).
type batchClient interface {
	ethereum.ContractCaller
	CodeAt(ctx context.Context, account common.Address, blockNumber *big.Int) ([]byte, error)
}

// batchBackend sends a transaction and returns its receipt (the devnet's
// Transact, or a simulated backend's send and commit).
type batchBackend interface {
	Transact(ctx context.Context, from devnet.Account, to common.Address, data []byte) (*types.Receipt, error)
}

func loadABIs(t *testing.T, e *batchEnv) {
	t.Helper()
	for name, dst := range map[string]*abi.ABI{"x402BatchSettlement": &e.escrow, "ERC3009DepositCollector": &e.collector, "Multicall3": &e.multicall, "USDToken": &e.token} {
		_, parsed, err := devnet.LoadArtifact(name)
		if err != nil {
			t.Fatal(err)
		}
		*dst = parsed
	}
}

func newBatchEnv(t *testing.T) *batchEnv {
	t.Helper()
	chain, client := devnettest.Start(t)
	e := &batchEnv{chain: chain, client: client, backend: chain,
		payer: chain.Account(devnet.PayerAccount), receiver: chain.Account(devnet.PayToAccount), authorizer: chain.Account(2),
		relayer: chain.Account(devnet.FacilitatorAccount), stranger: chain.Account(3)}
	loadABIs(t, e)
	return e
}

func (e *batchEnv) config(token common.Address, delay int64, salt byte) channelConfig {
	c := channelConfig{Payer: e.payer.Address, PayerAuthorizer: e.payer.Address, Receiver: e.receiver.Address,
		ReceiverAuthorizer: e.authorizer.Address, Token: token, WithdrawDelay: big.NewInt(delay)}
	c.Salt[31] = salt
	return c
}

func pack(t *testing.T, a abi.ABI, method string, args ...any) []byte {
	t.Helper()
	data, err := a.Pack(method, args...)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return data
}

// read calls a view of the escrow and returns its outputs.
func (e *batchEnv) read(t *testing.T, method string, args ...any) []any {
	t.Helper()
	out, err := e.client.CallContract(context.Background(), ethereum.CallMsg{To: &escrowAddr, Data: pack(t, e.escrow, method, args...)}, nil)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	vals, err := e.escrow.Unpack(method, out)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

func (e *batchEnv) balanceOf(t *testing.T, token, who common.Address) int64 {
	t.Helper()
	out, err := e.client.CallContract(context.Background(), ethereum.CallMsg{To: &token, Data: pack(t, e.token, "balanceOf", who)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return new(big.Int).SetBytes(out).Int64()
}

// channel returns channels(id): balance and totalClaimed.
func (e *batchEnv) channel(t *testing.T, id common.Hash) (int64, int64) {
	t.Helper()
	v := e.read(t, "channels", id)
	return v[0].(*big.Int).Int64(), v[1].(*big.Int).Int64()
}

// collectorData signs the payer's ReceiveWithAuthorization of amount to
// the collector for channel c (token's EIP-712 domain, deposit nonce of
// the channel and salt) and encodes it as the collector takes it.
func (e *batchEnv) collectorData(t *testing.T, c channelConfig, signer devnet.Account, amount int64, salt int64) []byte {
	t.Helper()
	validBefore := big.NewInt(time.Now().Add(time.Hour).Unix())
	nonce := depositNonce(channelID(c), big.NewInt(salt))
	structHash := crypto.Keccak256(crypto.Keccak256([]byte(receiveAuthType)), word(c.Payer[:]), word(collectorAddr[:]),
		uword(uint64(amount)), uword(0), word(validBefore.Bytes()), nonce[:])
	sig := sign(t, typedDigest(domainSeparator(devnet.TokenName, devnet.TokenVersion, c.Token), structHash), signer)
	u256, _ := abi.NewType("uint256", "", nil)
	bs, _ := abi.NewType("bytes", "", nil)
	data, err := abi.Arguments{{Type: u256}, {Type: u256}, {Type: u256}, {Type: bs}}.Pack(big.NewInt(0), validBefore, big.NewInt(salt), sig)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func (e *batchEnv) depositData(t *testing.T, c channelConfig, amount, salt int64) []byte {
	t.Helper()
	return pack(t, e.escrow, "deposit", c, big.NewInt(amount), collectorAddr, e.collectorData(t, c, e.payer, amount, salt))
}

// row is a claim row of channel c: a voucher of max signed by signer,
// claimed up to total.
func row(t *testing.T, c channelConfig, signer devnet.Account, max, total int64) voucherClaim {
	t.Helper()
	return voucherClaim{Voucher: voucher{Channel: c, MaxClaimableAmount: big.NewInt(max)},
		Signature: sign(t, voucherDigest(channelID(c), big.NewInt(max)), signer), TotalClaimed: big.NewInt(total)}
}

func (e *batchEnv) claimData(t *testing.T, signer devnet.Account, rows ...voucherClaim) []byte {
	t.Helper()
	if rows == nil {
		rows = []voucherClaim{}
	}
	return pack(t, e.escrow, "claimWithSignature", rows, sign(t, claimBatchDigest(rows), signer))
}

func (e *batchEnv) refundData(t *testing.T, c channelConfig, signer devnet.Account, amount, nonce int64) []byte {
	t.Helper()
	sig := sign(t, refundDigest(channelID(c), big.NewInt(nonce), big.NewInt(amount)), signer)
	return pack(t, e.escrow, "refundWithSignature", c, big.NewInt(amount), big.NewInt(nonce), sig)
}

// send transacts and requires success.
func (e *batchEnv) send(t *testing.T, from devnet.Account, to common.Address, data []byte) *types.Receipt {
	t.Helper()
	rcpt, err := e.backend.Transact(context.Background(), from, to, data)
	if err != nil {
		t.Fatalf("transaction from %s: %v (%s)", from.Address, err, e.reason(err))
	}
	if rcpt.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("transaction %s reverted", rcpt.TxHash)
	}
	return rcpt
}

// events counts the escrow's events in a receipt by name.
func (e *batchEnv) events(rcpt *types.Receipt) map[string]int {
	n := map[string]int{}
	for _, l := range rcpt.Logs {
		if l.Address != escrowAddr || len(l.Topics) == 0 {
			continue
		}
		if ev, err := e.escrow.EventByID(l.Topics[0]); err == nil {
			n[ev.Name]++
		}
	}
	return n
}

// reason names a revert: the custom error of one of the ABIs, or the
// Error(string) text, or the error itself.
func (e *batchEnv) reason(err error) string {
	var de rpc.DataError
	if !errors.As(err, &de) {
		return err.Error()
	}
	s, _ := de.ErrorData().(string)
	data, decErr := hexutil.Decode(s)
	if decErr != nil || len(data) < 4 {
		return err.Error()
	}
	if msg, err := abi.UnpackRevert(data); err == nil {
		return msg
	}
	for _, a := range []abi.ABI{e.escrow, e.collector, e.multicall, e.token} {
		for _, ev := range a.Errors {
			if bytes.Equal(ev.ID[:4], data[:4]) {
				return ev.Name
			}
		}
	}
	return err.Error()
}

// call is one eth_call and the revert it must give ("" for success).
type call struct {
	name string
	from devnet.Account
	to   common.Address
	data []byte
	want string
}

// expect runs the calls as parallel subtests of a group.
func (e *batchEnv) expect(t *testing.T, group string, calls []call) {
	t.Helper()
	t.Run(group, func(t *testing.T) {
		for _, c := range calls {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				_, err := e.client.CallContract(context.Background(), ethereum.CallMsg{From: c.from.Address, To: &c.to, Data: c.data}, nil)
				switch {
				case c.want == "" && err != nil:
					t.Errorf("reverted: %s", e.reason(err))
				case c.want != "" && err == nil:
					t.Errorf("succeeded, want %s", c.want)
				case c.want != "" && e.reason(err) != c.want:
					t.Errorf("reverted with %s, want %s", e.reason(err), c.want)
				}
			})
		}
	})
}

// TestBatchSettlementOnDevnet runs a channel's life on the devnet against
// the contracts at their canonical addresses: a deposit through the
// ERC-3009 collector, claims with claimWithSignature (cumulative totals, a
// stale row skipped), settle, a cooperative refund bundled with a claim in
// the escrow's multicall, a timed withdrawal requested and refused before
// its delay (the devnet's clock is the wall clock, so the delay cannot
// pass here: TestBatchSettlementWithdrawal finalizes one on a simulated
// chain), each rule's refusals, and Multicall3's reads.
func TestBatchSettlementOnDevnet(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t)
	ctx := context.Background()
	token := e.chain.Token

	for name, addr := range map[string]common.Address{"x402BatchSettlement": escrowAddr, "ERC3009DepositCollector": collectorAddr, "Multicall3": multicallAddr} {
		art, _, err := devnet.LoadArtifact(name)
		if err != nil {
			t.Fatal(err)
		}
		code, err := e.client.CodeAt(ctx, addr, nil)
		if err != nil || !bytes.Equal(code, common.FromHex(art.DeployedBytecode)) {
			t.Errorf("%s at %s: %d bytes of code (%v), want the artifact's %d", name, addr, len(code), err, len(common.FromHex(art.DeployedBytecode)))
		}
	}

	// The note's vectors are for chain 8453 and the canonical escrow: the
	// contract computes them on the devnet exactly.
	vc := vectorConfig()
	vid := channelID(vc)
	if got := e.read(t, "getChannelId", vc)[0].([32]byte); common.Hash(got).Hex() != vectorChannelID {
		t.Errorf("getChannelId %x, want %s", got, vectorChannelID)
	}
	if got := e.read(t, "getVoucherDigest", vid, big.NewInt(1000))[0].([32]byte); common.Hash(got).Hex() != vectorVoucher {
		t.Errorf("getVoucherDigest %x", got)
	}
	if got := e.read(t, "getRefundDigest", vid, big.NewInt(0), big.NewInt(500))[0].([32]byte); common.Hash(got).Hex() != vectorRefund {
		t.Errorf("getRefundDigest %x", got)
	}
	vrows := []voucherClaim{{Voucher: voucher{Channel: vc, MaxClaimableAmount: big.NewInt(1000)}, Signature: []byte{}, TotalClaimed: big.NewInt(700)}}
	if got := e.read(t, "getClaimBatchDigest", vrows)[0].([32]byte); common.Hash(got).Hex() != vectorClaimBatch {
		t.Errorf("getClaimBatchDigest %x", got)
	}
	for method, typ := range map[string]string{"CHANNEL_CONFIG_TYPEHASH": channelConfigType, "VOUCHER_TYPEHASH": voucherType, "REFUND_TYPEHASH": refundType,
		"CLAIM_ENTRY_TYPEHASH": claimEntryType, "CLAIM_BATCH_TYPEHASH": claimBatchType} {
		if got := e.read(t, method)[0].([32]byte); common.Hash(got) != crypto.Keccak256Hash([]byte(typ)) {
			t.Errorf("%s %x", method, got)
		}
	}
	dom := e.read(t, "eip712Domain")
	if dom[1] != devnet.BatchSettlementName || dom[2] != devnet.BatchSettlementVersion || dom[3].(*big.Int).Int64() != devnet.ChainID || dom[4] != escrowAddr {
		t.Errorf("eip712Domain %v", dom)
	}
	if lo, hi := e.read(t, "MIN_WITHDRAW_DELAY")[0], e.read(t, "MAX_WITHDRAW_DELAY")[0]; lo.(*big.Int).Int64() != devnet.MinWithdrawDelay || hi.(*big.Int).Int64() != devnet.MaxWithdrawDelay {
		t.Errorf("withdraw delay bounds %v..%v", lo, hi)
	}

	// Deposit 1 USD through the collector, relayed by the facilitator.
	c := e.config(token, 900, 1)
	id := channelID(c)
	payerBefore := e.balanceOf(t, token, e.payer.Address)
	rcpt := e.send(t, e.relayer, escrowAddr, e.depositData(t, c, 1_000_000, 1))
	if ev := e.events(rcpt); ev["ChannelCreated"] != 1 || ev["Deposited"] != 1 {
		t.Errorf("deposit events %v", ev)
	}
	if bal, claimed := e.channel(t, id); bal != 1_000_000 || claimed != 0 {
		t.Errorf("after deposit: balance %d, claimed %d", bal, claimed)
	}
	if got := payerBefore - e.balanceOf(t, token, e.payer.Address); got != 1_000_000 {
		t.Errorf("payer paid %d", got)
	}
	if got := e.balanceOf(t, token, collectorAddr); got != 0 {
		t.Errorf("the collector kept %d", got)
	}

	// Claim 300k, then a batch whose first row is stale (at or below the
	// claimed total: skipped unchecked, here with a junk signature) and
	// whose second raises the total to 500k.
	rcpt = e.send(t, e.relayer, escrowAddr, e.claimData(t, e.authorizer, row(t, c, e.payer, 300_000, 300_000)))
	if ev := e.events(rcpt); ev["Claimed"] != 1 {
		t.Errorf("claim events %v", ev)
	}
	stale := row(t, c, e.payer, 200_000, 200_000)
	stale.Signature = bytes.Repeat([]byte{1}, 65)
	rcpt = e.send(t, e.relayer, escrowAddr, e.claimData(t, e.authorizer, stale, row(t, c, e.payer, 500_000, 500_000)))
	if ev := e.events(rcpt); ev["Claimed"] != 1 {
		t.Errorf("claim events with a stale row %v", ev)
	}
	if bal, claimed := e.channel(t, id); bal != 1_000_000 || claimed != 500_000 {
		t.Errorf("after claims: balance %d, claimed %d", bal, claimed)
	}

	// Settle pays the receiver what was claimed; again, nothing (no event).
	receiverBefore := e.balanceOf(t, token, e.receiver.Address)
	rcpt = e.send(t, e.relayer, escrowAddr, pack(t, e.escrow, "settle", e.receiver.Address, token))
	if ev := e.events(rcpt); ev["Settled"] != 1 {
		t.Errorf("settle events %v", ev)
	}
	if rcpt.GasUsed > 120_000 { // the official facilitator sends settle with gas 120000
		t.Errorf("settle used %d gas", rcpt.GasUsed)
	}
	if got := e.balanceOf(t, token, e.receiver.Address) - receiverBefore; got != 500_000 {
		t.Errorf("receiver got %d", got)
	}
	if rcpt := e.send(t, e.relayer, escrowAddr, pack(t, e.escrow, "settle", e.receiver.Address, token)); len(e.events(rcpt)) != 0 {
		t.Errorf("a second settle emitted %v", e.events(rcpt))
	}
	if bal, _ := e.channel(t, id); bal != 1_000_000 {
		t.Errorf("settle changed the balance to %d", bal)
	}

	e.expect(t, "refusals", []call{
		{"deposit withdrawDelay 899", e.relayer, escrowAddr, e.depositData(t, e.config(token, 899, 9), 1, 1), "WithdrawDelayOutOfRange"},
		{"deposit withdrawDelay 2592001", e.relayer, escrowAddr, e.depositData(t, e.config(token, 2_592_001, 9), 1, 1), "WithdrawDelayOutOfRange"},
		{"deposit withdrawDelay 900", e.relayer, escrowAddr, e.depositData(t, e.config(token, 900, 9), 1, 1), ""},
		{"deposit withdrawDelay 2592000", e.relayer, escrowAddr, e.depositData(t, e.config(token, 2_592_000, 9), 1, 1), ""},
		{"deposit of 0", e.relayer, escrowAddr, e.depositData(t, c, 0, 2), "ZeroDeposit"},
		{"deposit without receiver authorizer", e.relayer, escrowAddr,
			pack(t, e.escrow, "deposit", channelConfig{Payer: e.payer.Address, Receiver: e.receiver.Address, Token: token, WithdrawDelay: big.NewInt(900)},
				big.NewInt(1), collectorAddr, []byte{}), "InvalidChannel"},
		{"deposit without collector", e.relayer, escrowAddr, pack(t, e.escrow, "deposit", c, big.NewInt(1), common.Address{}, []byte{}), "InvalidCollector"},
		{"deposit authorized by the wrong key", e.relayer, escrowAddr,
			pack(t, e.escrow, "deposit", c, big.NewInt(10), collectorAddr, e.collectorData(t, c, e.stranger, 10, 3)), "FiatTokenV2: invalid signature"},
		{"deposit authorization replayed", e.relayer, escrowAddr, e.depositData(t, c, 1_000_000, 1), "FiatTokenV2: authorization is used or canceled"},
		{"collect called directly", e.relayer, collectorAddr,
			pack(t, e.collector, "collect", e.payer.Address, token, big.NewInt(1), id, e.collectorData(t, c, e.payer, 1, 4)), "OnlyX402BatchSettlement"},
		{"claim batch signed by the wrong key", e.relayer, escrowAddr, e.claimData(t, e.receiver, row(t, c, e.payer, 600_000, 600_000)), "InvalidSignature"},
		{"voucher signed by the wrong key", e.relayer, escrowAddr, e.claimData(t, e.authorizer, row(t, c, e.stranger, 600_000, 600_000)), "InvalidSignature"},
		{"claim beyond the balance", e.relayer, escrowAddr, e.claimData(t, e.authorizer, row(t, c, e.payer, 1_000_001, 1_000_001)), "ClaimExceedsBalance"},
		{"claim beyond the voucher", e.relayer, escrowAddr, e.claimData(t, e.authorizer, row(t, c, e.payer, 600_000, 600_001)), "ClaimExceedsCeiling"},
		{"empty claim batch", e.relayer, escrowAddr, e.claimData(t, e.authorizer), "EmptyBatch"},
		{"rows of two authorizers", e.relayer, escrowAddr, e.claimData(t, e.authorizer, row(t, c, e.payer, 600_000, 600_000),
			row(t, channelConfig{Payer: c.Payer, PayerAuthorizer: c.PayerAuthorizer, Receiver: c.Receiver, ReceiverAuthorizer: e.receiver.Address,
				Token: token, WithdrawDelay: big.NewInt(900)}, e.payer, 1, 1)), "NotReceiverAuthorizer"},
		{"direct claim by a stranger", e.stranger, escrowAddr, pack(t, e.escrow, "claim", []voucherClaim{row(t, c, e.payer, 600_000, 600_000)}), "NotAuthorizedToClaim"},
		{"direct claim by the receiver", e.receiver, escrowAddr, pack(t, e.escrow, "claim", []voucherClaim{row(t, c, e.payer, 600_000, 600_000)}), ""},
		{"refund signed by the wrong key", e.relayer, escrowAddr, e.refundData(t, c, e.receiver, 100, 0), "InvalidSignature"},
		{"refund with a future nonce", e.relayer, escrowAddr, e.refundData(t, c, e.authorizer, 100, 1), "InvalidRefundNonce"},
		{"refund of 0", e.receiver, escrowAddr, pack(t, e.escrow, "refund", c, big.NewInt(0)), "ZeroRefund"},
		{"direct refund by a stranger", e.stranger, escrowAddr, pack(t, e.escrow, "refund", c, big.NewInt(1)), "NotAuthorizedToRefund"},
		{"withdraw requested by a stranger", e.stranger, escrowAddr, pack(t, e.escrow, "initiateWithdraw", c, big.NewInt(1)), "InvalidChannel"},
		{"withdraw of 0", e.payer, escrowAddr, pack(t, e.escrow, "initiateWithdraw", c, big.NewInt(0)), "NothingToWithdraw"},
		{"withdraw beyond the unclaimed", e.payer, escrowAddr, pack(t, e.escrow, "initiateWithdraw", c, big.NewInt(500_001)), "WithdrawAmountExceedsAvailable"},
		{"finalize with nothing pending", e.payer, escrowAddr, pack(t, e.escrow, "finalizeWithdraw", c), "WithdrawalNotPending"},
		{"finalize by a stranger", e.stranger, escrowAddr, pack(t, e.escrow, "finalizeWithdraw", c), "NotAuthorizedToFinalizeWithdraw"},
	})

	// Cooperative refund of the rest, bundled with an (already claimed)
	// claim in the escrow's multicall, as the official facilitator sends
	// it: the payer gets the unclaimed 500k and the refund nonce moves on.
	payerBefore = e.balanceOf(t, token, e.payer.Address)
	refund := e.refundData(t, c, e.authorizer, 1_000_000, 0)
	rcpt = e.send(t, e.relayer, escrowAddr, pack(t, e.escrow, "multicall",
		[][]byte{e.claimData(t, e.authorizer, row(t, c, e.payer, 500_000, 500_000)), refund}))
	if ev := e.events(rcpt); ev["Refunded"] != 1 || ev["Claimed"] != 0 || ev["ChannelClosed"] != 0 {
		t.Errorf("refund events %v", ev)
	}
	if got := e.balanceOf(t, token, e.payer.Address) - payerBefore; got != 500_000 {
		t.Errorf("payer refunded %d", got)
	}
	if bal, claimed := e.channel(t, id); bal != 500_000 || claimed != 500_000 {
		t.Errorf("after refund: balance %d, claimed %d", bal, claimed)
	}
	if n := e.read(t, "refundNonce", id)[0].(*big.Int); n.Int64() != 1 {
		t.Errorf("refund nonce %s, want 1", n)
	}

	// A second deposit, then the payer's timed withdrawal: requested now,
	// refused before its delay.
	e.send(t, e.relayer, escrowAddr, e.depositData(t, c, 200_000, 5))
	rcpt = e.send(t, e.payer, escrowAddr, pack(t, e.escrow, "initiateWithdraw", c, big.NewInt(150_000)))
	if ev := e.events(rcpt); ev["WithdrawInitiated"] != 1 {
		t.Errorf("initiateWithdraw events %v", ev)
	}
	pending := e.read(t, "pendingWithdrawals", id)
	if pending[0].(*big.Int).Int64() != 150_000 || pending[1].(*big.Int).Sign() == 0 {
		t.Errorf("pending withdrawal %v", pending)
	}
	e.expect(t, "after the refund and a withdrawal request", []call{
		{"refund replayed", e.relayer, escrowAddr, refund, "InvalidRefundNonce"},
		{"finalize before the delay", e.payer, escrowAddr, pack(t, e.escrow, "finalizeWithdraw", c), "WithdrawDelayNotElapsed"},
		{"second withdrawal request", e.payer, escrowAddr, pack(t, e.escrow, "initiateWithdraw", c, big.NewInt(1)), "WithdrawalAlreadyPending"},
		{"refund at the next nonce", e.relayer, escrowAddr, e.refundData(t, c, e.authorizer, 1, 1), ""},
	})

	// Multicall3: the official facilitator's read (tryAggregate, failures
	// allowed) and aggregate3.
	type mcCall struct {
		Target   common.Address
		CallData []byte
	}
	reads := []mcCall{
		{escrowAddr, pack(t, e.escrow, "channels", id)},
		{escrowAddr, pack(t, e.escrow, "refundNonce", id)},
		{token, pack(t, e.token, "balanceOf", e.payer.Address)},
		{escrowAddr, []byte{0xde, 0xad, 0xbe, 0xef}},
	}
	out, err := e.client.CallContract(ctx, ethereum.CallMsg{To: &multicallAddr, Data: pack(t, e.multicall, "tryAggregate", false, reads)}, nil)
	if err != nil {
		t.Fatalf("tryAggregate: %v", err)
	}
	res, err := e.multicall.Unpack("tryAggregate", out)
	if err != nil {
		t.Fatal(err)
	}
	results := res[0].([]struct {
		Success    bool   `json:"success"`
		ReturnData []byte `json:"returnData"`
	})
	if len(results) != 4 || !results[0].Success || !results[1].Success || !results[2].Success || results[3].Success ||
		new(big.Int).SetBytes(results[0].ReturnData[:32]).Int64() != 700_000 || new(big.Int).SetBytes(results[1].ReturnData).Int64() != 1 {
		t.Errorf("tryAggregate %+v", results)
	}
	type call3 struct {
		Target       common.Address
		AllowFailure bool
		CallData     []byte
	}
	e.expect(t, "multicall3", []call{
		{"tryAggregate requiring success", e.relayer, multicallAddr, pack(t, e.multicall, "tryAggregate", true, reads), "Multicall3: call failed"},
		{"aggregate3 allowing the failure", e.relayer, multicallAddr, pack(t, e.multicall, "aggregate3", []call3{{escrowAddr, false, reads[0].CallData}, {escrowAddr, true, reads[3].CallData}}), ""},
		{"aggregate3 not allowing it", e.relayer, multicallAddr, pack(t, e.multicall, "aggregate3", []call3{{escrowAddr, false, reads[3].CallData}}), "Multicall3: call failed"},
	})
}
