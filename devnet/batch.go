package devnet

import (
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// Canonical addresses of the x402 batch-settlement contracts and of
// Multicall3, as the official `@x402/evm` 2.27 client and facilitator
// hard-code them (BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
// MULTICALL3_ADDRESS): nothing there lets a chain name others, so the
// devnet has its contracts at exactly these addresses.
const (
	BatchSettlementAddress         = "0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003"
	ERC3009DepositCollectorAddress = "0x4020806089470a89826cB9fB1f4059150b550004"
	Multicall3Address              = "0xcA11bde05977b3631167028862bE2a173976CA11"
)

// EIP-712 domain of the batch-settlement escrow (its chain id is ChainID,
// its verifying contract BatchSettlementAddress).
const (
	BatchSettlementName    = "x402 Batch Settlement"
	BatchSettlementVersion = "1"
)

// Bounds of a channel's withdrawDelay, in seconds, both inclusive.
const (
	MinWithdrawDelay = 900
	MaxWithdrawDelay = 2_592_000
)

// BatchSettlement is what a Description says about the batch-settlement
// contracts: where the escrow (x402BatchSettlement), its ERC-3009 deposit
// collector and Multicall3 are, and the escrow's EIP-712 domain.
type BatchSettlement struct {
	Escrow                  common.Address `json:"escrow"`
	ERC3009DepositCollector common.Address `json:"erc3009DepositCollector"`
	Multicall3              common.Address `json:"multicall3"`
	Name                    string         `json:"name"`
	Version                 string         `json:"version"`
}

// batchSettlement describes the contracts BatchSettlementAlloc places.
func batchSettlement() *BatchSettlement {
	return &BatchSettlement{
		Escrow:                  common.HexToAddress(BatchSettlementAddress),
		ERC3009DepositCollector: common.HexToAddress(ERC3009DepositCollectorAddress),
		Multicall3:              common.HexToAddress(Multicall3Address),
		Name:                    BatchSettlementName,
		Version:                 BatchSettlementVersion,
	}
}

// BatchSettlementAlloc returns the genesis accounts that put the escrow,
// its ERC-3009 deposit collector and Multicall3 at their canonical
// addresses: the compiled runtime code (the artifacts' deployedBytecode),
// no storage, nonce 1 as for any contract.
//
// Placing runtime code, rather than deploying and copying the result, is
// sound because none of the three runs a constructor or has an immutable
// (which solc leaves as zeros in deployedBytecode, to be filled in by the
// constructor): the escrow computes its EIP-712 domain separator per call
// from constants, block.chainid and address(this), and the collector's
// escrow address is a constant. They start with empty storage, as a
// fresh deployment would. A test deploys each artifact by transaction and
// compares the code left on chain with the one placed here.
func BatchSettlementAlloc() (types.GenesisAlloc, error) {
	alloc := types.GenesisAlloc{}
	for _, c := range []struct{ name, addr string }{
		{"x402BatchSettlement", BatchSettlementAddress},
		{"ERC3009DepositCollector", ERC3009DepositCollectorAddress},
		{"Multicall3", Multicall3Address},
	} {
		art, _, err := LoadArtifact(c.name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		code := common.FromHex(art.DeployedBytecode)
		if len(code) == 0 {
			return nil, fmt.Errorf("%s: no runtime code", c.name)
		}
		alloc[common.HexToAddress(c.addr)] = types.Account{Code: code, Nonce: 1, Balance: new(big.Int)}
	}
	return alloc, nil
}
