package payment

import (
	"fmt"
	"math/big"
	"strings"
)

// USD converts an amount in atomic units of a token with the given
// decimals to dollars, for metrics (never for money: it is a float).
func USD(amount *big.Int, decimals int) float64 {
	f, _ := new(big.Rat).SetFrac(amount, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(decimals)), nil)).Float64()
	return f
}

// AtomicAmount converts an exact decimal USD price ("0.02") into atomic
// units of a token with the given decimals (20000 for 6), without floats.
// More decimal places than the token has is an error, never a rounding.
func AtomicAmount(price string, decimals int) (*big.Int, error) {
	whole, frac, _ := strings.Cut(price, ".")
	if whole == "" || strings.ContainsAny(whole+frac, "+-eE. ") {
		return nil, fmt.Errorf("price %q is not a plain decimal", price)
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > decimals {
		return nil, fmt.Errorf("price %q has more than %d decimal places", price, decimals)
	}
	v, ok := new(big.Int).SetString(whole+frac+strings.Repeat("0", decimals-len(frac)), 10)
	if !ok || v.Sign() <= 0 {
		return nil, fmt.Errorf("price %q is not a positive decimal", price)
	}
	return v, nil
}
