// Package devnettest starts throwaway devnets for tests: one on a loopback
// port, with a JSON-RPC client, both closed when the test ends.
package devnettest

import (
	"context"
	"net"
	"testing"

	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/devnet"
)

// Start runs a devnet for the rest of the test and returns it with a
// client of its JSON-RPC endpoint.
func Start(t testing.TB) (*devnet.Chain, *ethclient.Client) {
	t.Helper()
	chain := StartChain(t)
	client, err := ethclient.Dial(chain.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return chain, client
}

// StartChain runs a devnet for the rest of the test.
func StartChain(t testing.TB) *devnet.Chain {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	chain, err := devnet.Start(context.Background(), lis)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { chain.Close() })
	return chain
}
