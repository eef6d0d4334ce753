// Package rig starts what the benchmarks of bench/ measure from outside:
// the tollgate binary built from this tree, a running `tollgate serve` on
// its devnet (serve.go), loopback addresses, payers funded on a devnet, a
// route's price, and the CPU a process (or a PostgreSQL cluster) spent,
// read from /proc.
package rig

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/service/catalog"
)

// BuildTollgate builds cmd/tollgate into a temporary directory.
func BuildTollgate(tb testing.TB) string {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			tb.Fatal("no go command to build cmd/tollgate")
		}
	}
	bin := filepath.Join(tb.TempDir(), "tollgate")
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/tollgate/tollgate/cmd/tollgate").CombinedOutput()
	if err != nil {
		tb.Fatalf("go build ./cmd/tollgate: %v\n%s", err, out)
	}
	return bin
}

// FreeAddr is a loopback address free at the time of the call.
func FreeAddr(tb testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// RoutePrice is the price of the paid operation route, in the devnet
// token's atomic units.
func RoutePrice(tb testing.TB, route string) *big.Int {
	cat, err := catalog.Load()
	if err != nil {
		tb.Fatal(err)
	}
	op, ok := cat.ByName(route)
	if !ok || !op.Paid() {
		tb.Fatalf("%s is not a paid operation", route)
	}
	p, err := payment.AtomicAmount(op.PriceUSD, devnet.TokenDecimals)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// FundPayers makes n fresh keys and sends each amount of the devnet
// token from the funded test accounts funders (in turn), waiting for
// every transfer. The payers need no ETH: deposits are ERC-3009
// authorizations that the facilitator sends, vouchers are signatures.
func FundPayers(tb testing.TB, chainURL string, n int, amount *big.Int, funders []uint32) []*ecdsa.PrivateKey {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	desc, err := devnet.Fetch(ctx, http.DefaultClient, chainURL)
	if err != nil {
		tb.Fatal(err)
	}
	ec, err := ethclient.Dial(chainURL)
	if err != nil {
		tb.Fatal(err)
	}
	defer ec.Close()
	gasPrice, err := ec.SuggestGasPrice(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	signer := types.LatestSignerForChainID(big.NewInt(devnet.ChainID))
	nonces := map[uint32]uint64{}
	keys := make([]*ecdsa.PrivateKey, n)
	var txs []*types.Transaction
	for i := range keys {
		if keys[i], err = crypto.GenerateKey(); err != nil {
			tb.Fatal(err)
		}
		idx := funders[i%len(funders)]
		from, err := devnet.DeriveKey(desc.Mnemonic, idx)
		if err != nil {
			tb.Fatal(err)
		}
		if _, ok := nonces[idx]; !ok {
			if nonces[idx], err = ec.PendingNonceAt(ctx, crypto.PubkeyToAddress(from.PublicKey)); err != nil {
				tb.Fatal(err)
			}
		}
		data := append(crypto.Keccak256([]byte("transfer(address,uint256)"))[:4],
			append(common.LeftPadBytes(crypto.PubkeyToAddress(keys[i].PublicKey).Bytes(), 32), common.LeftPadBytes(amount.Bytes(), 32)...)...)
		tx, err := types.SignNewTx(from, signer, &types.LegacyTx{Nonce: nonces[idx], GasPrice: gasPrice, Gas: 300_000, To: &desc.Token.Address, Data: data})
		if err != nil {
			tb.Fatal(err)
		}
		nonces[idx]++
		if err := ec.SendTransaction(ctx, tx); err != nil {
			tb.Fatalf("fund payer %d from #%d: %v", i, idx, err)
		}
		txs = append(txs, tx)
	}
	for _, tx := range txs {
		for {
			r, err := ec.TransactionReceipt(ctx, tx.Hash())
			if err == nil {
				if r.Status != types.ReceiptStatusSuccessful {
					tb.Fatalf("funding transfer %s failed", tx.Hash())
				}
				break
			}
			if ctx.Err() != nil {
				tb.Fatalf("funding transfer %s: no receipt: %v", tx.Hash(), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return keys
}

// ProcCPU is the CPU seconds process pid has spent.
func ProcCPU(pid int) float64 {
	f := StatFields(pid)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicks
}

// StatFields are the fields of /proc/pid/stat after the command name.
func StatFields(pid int) []string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(raw) // the command name, in parentheses, may hold spaces
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// ClusterCPU is the CPU seconds the PostgreSQL cluster serving database
// URL db has spent: its postmaster, its live backends and the ones it
// reaped.
func ClusterCPU(db string) float64 {
	u, err := url.Parse(db)
	if err != nil {
		return 0
	}
	entries, _ := os.ReadDir("/proc")
	master := 0
	parents := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := StatFields(pid)
		if len(f) < 2 {
			continue
		}
		parents[pid], _ = strconv.Atoi(f[1])
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(string(cmd), "\x00")
		if i := slices.Index(args, "-p"); strings.HasSuffix(args[0], "/postgres") && i > 0 && i+1 < len(args) && args[i+1] == u.Port() {
			master = pid
		}
	}
	if master == 0 {
		return 0
	}
	total := 0.0
	if f := StatFields(master); len(f) >= 15 { // cutime, cstime: the reaped children's
		cu, _ := strconv.ParseFloat(f[13], 64)
		cs, _ := strconv.ParseFloat(f[14], 64)
		total += (cu + cs) / clockTicks
	}
	for pid, ppid := range parents {
		if pid == master || ppid == master {
			total += ProcCPU(pid)
		}
	}
	return total
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100
