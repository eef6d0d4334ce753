package devnet_test

import (
	"bytes"
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/params"

	"github.com/tollgate/tollgate/devnet"
)

// simChain is a go-ethereum simulated backend with chain id 8453 and the
// devnet's batch-settlement genesis accounts. Unlike the devnet, whose
// blocks never run ahead of the wall clock, its clock can jump (AdjustTime),
// which a timed withdrawal's 900 s minimum delay needs.
type simChain struct {
	sim *simulated.Backend
	cl  simulated.Client
}

func startSim(t *testing.T, funded ...devnet.Account) *simChain {
	t.Helper()
	alloc, err := devnet.BatchSettlementAlloc()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range funded {
		alloc[a.Address] = types.Account{Balance: new(big.Int).Mul(big.NewInt(100), big.NewInt(params.Ether))}
	}
	sim := simulated.NewBackend(alloc, func(_ *node.Config, ec *ethconfig.Config) {
		cfg := *ec.Genesis.Config // a copy: never mutate the shared dev config
		cfg.ChainID = big.NewInt(devnet.ChainID)
		ec.Genesis.Config = &cfg
		ec.NetworkId = devnet.ChainID
	})
	t.Cleanup(func() { sim.Close() })
	return &simChain{sim: sim, cl: sim.Client()}
}

// send signs a transaction (to nil deploys), commits it in a block and
// returns its receipt, or the gas estimate's error (a revert).
func (s *simChain) send(ctx context.Context, from devnet.Account, to *common.Address, data []byte) (*types.Receipt, error) {
	gas, err := s.cl.EstimateGas(ctx, ethereum.CallMsg{From: from.Address, To: to, Data: data})
	if err != nil {
		return nil, err
	}
	nonce, err := s.cl.PendingNonceAt(ctx, from.Address)
	if err != nil {
		return nil, err
	}
	head, err := s.cl.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, err
	}
	tx, err := types.SignNewTx(from.Key, types.LatestSignerForChainID(big.NewInt(devnet.ChainID)), &types.DynamicFeeTx{
		ChainID: big.NewInt(devnet.ChainID), Nonce: nonce, GasTipCap: big.NewInt(params.GWei),
		GasFeeCap: new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), big.NewInt(params.GWei)), Gas: gas * 12 / 10, To: to, Data: data,
	})
	if err != nil {
		return nil, err
	}
	if err := s.cl.SendTransaction(ctx, tx); err != nil {
		return nil, err
	}
	s.sim.Commit()
	return s.cl.TransactionReceipt(ctx, tx.Hash())
}

// Transact makes simChain a batchBackend.
func (s *simChain) Transact(ctx context.Context, from devnet.Account, to common.Address, data []byte) (*types.Receipt, error) {
	return s.send(ctx, from, &to, data)
}

func account(t *testing.T, i uint32) devnet.Account {
	t.Helper()
	k, err := devnet.DeriveKey(devnet.Mnemonic, i)
	if err != nil {
		t.Fatal(err)
	}
	return devnet.Account{Address: crypto.PubkeyToAddress(k.PublicKey), Key: k}
}

// TestBatchSettlementRuntimeCode: deployed by transaction, each contract
// leaves exactly its artifact's deployedBytecode and no storage, so the
// code the devnet places in its genesis (BatchSettlementAlloc) is what a
// deployment would produce (no constructor, no immutables).
func TestBatchSettlementRuntimeCode(t *testing.T) {
	t.Parallel()
	deployer := account(t, devnet.FacilitatorAccount)
	s := startSim(t, deployer)
	ctx := context.Background()
	for _, name := range []string{"x402BatchSettlement", "ERC3009DepositCollector", "Multicall3"} {
		art, _, err := devnet.LoadArtifact(name)
		if err != nil {
			t.Fatal(err)
		}
		rcpt, err := s.send(ctx, deployer, nil, common.FromHex(art.Bytecode))
		if err != nil || rcpt.Status != types.ReceiptStatusSuccessful {
			t.Fatalf("%s: deploy %v %v", name, rcpt, err)
		}
		code, err := s.cl.CodeAt(ctx, rcpt.ContractAddress, nil)
		if err != nil || !bytes.Equal(code, common.FromHex(art.DeployedBytecode)) {
			t.Errorf("%s: deployed code (%d bytes, %v) differs from deployedBytecode (%d bytes)", name, len(code), err, len(common.FromHex(art.DeployedBytecode)))
		}
		for slot := range int64(4) {
			if v, err := s.cl.StorageAt(ctx, rcpt.ContractAddress, common.BigToHash(big.NewInt(slot)), nil); err != nil || common.BytesToHash(v) != (common.Hash{}) {
				t.Errorf("%s: slot %d = %x (%v) after deployment", name, slot, v, err)
			}
		}
	}
}

// TestBatchSettlementWithdrawal finalizes a timed withdrawal: refused until
// withdrawDelay has passed on the chain's clock, then paid to the payer,
// closing the never-claimed channel.
func TestBatchSettlementWithdrawal(t *testing.T) {
	t.Parallel()
	e := &batchEnv{payer: account(t, devnet.PayerAccount), receiver: account(t, devnet.PayToAccount), authorizer: account(t, 2),
		relayer: account(t, devnet.FacilitatorAccount), stranger: account(t, 3)}
	loadABIs(t, e)
	s := startSim(t, e.payer, e.receiver, e.authorizer, e.relayer, e.stranger)
	e.client, e.backend = s.cl, s
	ctx := context.Background()

	art, _, err := devnet.TokenArtifact()
	if err != nil {
		t.Fatal(err)
	}
	rcpt, err := s.send(ctx, e.relayer, nil, append(common.FromHex(art.Bytecode), pack(t, e.token, "", devnet.TokenName, devnet.TokenSymbol)...))
	if err != nil || rcpt.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("deploy token: %v %v", rcpt, err)
	}
	token := rcpt.ContractAddress
	e.send(t, e.relayer, token, pack(t, e.token, "mint", e.payer.Address, big.NewInt(1_000_000)))

	const delay = 900
	c := e.config(token, delay, 7)
	id := channelID(c)
	e.send(t, e.relayer, escrowAddr, e.depositData(t, c, 400_000, 1))
	rcpt = e.send(t, e.payer, escrowAddr, pack(t, e.escrow, "initiateWithdraw", c, big.NewInt(400_000)))
	requested := e.read(t, "pendingWithdrawals", id)[1].(*big.Int).Int64()
	finalize := pack(t, e.escrow, "finalizeWithdraw", c)

	for _, step := range []struct {
		name         string
		advance      time.Duration // chain clock jump before the attempt
		sinceRequest int           // the head's timestamp, then, after the request's
		want         string
	}{
		{"at once", 0, 0, "WithdrawDelayNotElapsed"},
		{"a second short of the delay", (delay - 1) * time.Second, delay - 1, "WithdrawDelayNotElapsed"},
		{"once the delay has passed", 1 * time.Second, delay, ""},
	} {
		if step.advance > 0 {
			if err := s.sim.AdjustTime(step.advance); err != nil {
				t.Fatal(err)
			}
		}
		head, err := s.cl.HeaderByNumber(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		// eth_call runs on the head, so its block.timestamp is the head's.
		if got, want := int64(head.Time)-requested, int64(step.sinceRequest); got != want {
			t.Fatalf("%s: head %d s after the request, want %d", step.name, got, want)
		}
		_, err = s.cl.CallContract(ctx, ethereum.CallMsg{From: e.payer.Address, To: &escrowAddr, Data: finalize}, nil)
		if step.want != "" {
			if err == nil || e.reason(err) != step.want {
				t.Fatalf("%s: finalizeWithdraw gave %v, want %s", step.name, err, step.want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %s", step.name, e.reason(err))
		}
	}
	before := e.balanceOf(t, token, e.payer.Address)
	rcpt = e.send(t, e.payer, escrowAddr, finalize)
	if ev := e.events(rcpt); ev["WithdrawFinalized"] != 1 || ev["ChannelClosed"] != 1 {
		t.Errorf("finalize events %v", ev)
	}
	if got := e.balanceOf(t, token, e.payer.Address) - before; got != 400_000 {
		t.Errorf("payer withdrew %d", got)
	}
	if bal, claimed := e.channel(t, id); bal != 0 || claimed != 0 {
		t.Errorf("after withdrawal: balance %d, claimed %d", bal, claimed)
	}
	if p := e.read(t, "pendingWithdrawals", id); p[1].(*big.Int).Sign() != 0 {
		t.Errorf("withdrawal still pending: %v", p)
	}
}
