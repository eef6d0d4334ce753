package devnet

import (
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/crypto"
)

// Mnemonic is the well-known test mnemonic whose first ten accounts
// (m/44'/60'/0'/0/i) the devnet funds: the same accounts as Hardhat's and
// Anvil's, so wallets and scripts already know them. Never use them with
// real funds.
const Mnemonic = "test test test test test test test test test test test junk"

// DeriveKey returns the key at m/44'/60'/0'/0/index of mnemonic (BIP-39
// seed with an empty passphrase, BIP-32 derivation, BIP-44 path).
func DeriveKey(mnemonic string, index uint32) (*ecdsa.PrivateKey, error) {
	keys, err := deriveKeys(mnemonic, index, 1)
	if err != nil {
		return nil, err
	}
	return keys[0], nil
}

// deriveKeys returns the keys at m/44'/60'/0'/0/first up to first+n-1,
// stretching the mnemonic (2048 rounds of PBKDF2) once for all of them.
func deriveKeys(mnemonic string, first, n uint32) ([]*ecdsa.PrivateKey, error) {
	seed, err := pbkdf2.Key(sha512.New, mnemonic, []byte("mnemonic"), 2048, 64)
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha512.New, []byte("Bitcoin seed"))
	mac.Write(seed)
	I := mac.Sum(nil)
	key, chain := I[:32], I[32:]
	const hardened = 0x80000000
	for _, child := range []uint32{44 + hardened, 60 + hardened, 0 + hardened, 0} {
		key, chain, err = deriveChild(key, chain, child)
		if err != nil {
			return nil, err
		}
	}
	keys := make([]*ecdsa.PrivateKey, 0, n)
	for i := first; i < first+n; i++ {
		k, _, err := deriveChild(key, chain, i)
		if err != nil {
			return nil, err
		}
		priv, err := crypto.ToECDSA(k)
		if err != nil {
			return nil, err
		}
		keys = append(keys, priv)
	}
	return keys, nil
}

// deriveChild is BIP-32 private child key derivation.
func deriveChild(key, chain []byte, index uint32) ([]byte, []byte, error) {
	data := make([]byte, 0, 37)
	if index >= 0x80000000 {
		data = append(append(data, 0), key...)
	} else {
		priv, err := crypto.ToECDSA(key)
		if err != nil {
			return nil, nil, err
		}
		data = append(data, crypto.CompressPubkey(&priv.PublicKey)...)
	}
	data = binary.BigEndian.AppendUint32(data, index)
	mac := hmac.New(sha512.New, chain)
	mac.Write(data)
	I := mac.Sum(nil)
	n := crypto.S256().Params().N
	il := new(big.Int).SetBytes(I[:32])
	if il.Cmp(n) >= 0 {
		return nil, nil, fmt.Errorf("bip32: invalid child %d", index)
	}
	child := il.Add(il, new(big.Int).SetBytes(key))
	child.Mod(child, n)
	if child.Sign() == 0 {
		return nil, nil, errors.New("bip32: zero child key")
	}
	return child.FillBytes(make([]byte, 32)), I[32:], nil
}
