package service

import (
	"google.golang.org/protobuf/types/known/wrapperspb"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/rules"
)

// demoAsOf is the computation time written in every sample.
const demoAsOf = "2026-11-20T12:00:00Z"

// demos returns one fixed, realistic sample per paid operation, keyed by
// operation name. They are built from the same messages the paid methods
// return, so the gateway writes them exactly as it writes paid answers.
func demos() map[string]*tollgatev1.GetDemoResponse {
	return map[string]*tollgatev1.GetDemoResponse{
		"candles":     {Sample: &tollgatev1.GetDemoResponse_Candles{Candles: demoCandles()}},
		"rugcheck":    {Sample: &tollgatev1.GetDemoResponse_Rugcheck{Rugcheck: demoRugCheck()}},
		"whales":      {Sample: &tollgatev1.GetDemoResponse_Whales{Whales: demoWhales()}},
		"signal":      {Sample: &tollgatev1.GetDemoResponse_Signal{Signal: demoSignal()}},
		"signal-pack": {Sample: &tollgatev1.GetDemoResponse_SignalPack{SignalPack: demoSignalPack()}},
		"token":       {Sample: &tollgatev1.GetDemoResponse_Token{Token: demoToken()}},
		"regime":      {Sample: &tollgatev1.GetDemoResponse_Regime{Regime: demoRegime()}},
		"lanes":       {Sample: &tollgatev1.GetDemoResponse_Lanes{Lanes: demoLanes()}},
		"forecast":    {Sample: &tollgatev1.GetDemoResponse_Forecast{Forecast: demoForecast()}},
	}
}

func demoCandles() *tollgatev1.GetCandlesResponse {
	// Six hourly ETH-USD candles ending 2026-11-20 11:00 UTC.
	rows := [][6]float64{
		// t, open, high, low, close, volume
		{1795154400, 3412.18, 3425.60, 3401.02, 3420.75, 1843.21},
		{1795158000, 3420.75, 3438.90, 3415.33, 3434.12, 2107.88},
		{1795161600, 3434.12, 3447.05, 3428.40, 3441.87, 1956.40},
		{1795165200, 3441.87, 3452.66, 3430.15, 3436.29, 1721.09},
		{1795168800, 3436.29, 3449.98, 3433.71, 3446.50, 1688.73},
		{1795172400, 3446.50, 3461.20, 3442.08, 3458.93, 2240.15},
	}
	resp := &tollgatev1.GetCandlesResponse{
		Product:     "ETH-USD",
		Granularity: 3600,
		Count:       int32(len(rows)),
		Indicators: &tollgatev1.CandleIndicators{
			Regime: tollgatev1.CandleRegime_CANDLE_REGIME_TREND,
			Rsi:    61.84,
			Ema10:  3441.27,
			Ema30:  3409.66,
		},
		AsOf:   demoAsOf,
		Source: "coinbase-exchange",
	}
	for _, r := range rows {
		resp.Candles = append(resp.Candles, &tollgatev1.Candle{
			T: uint32(r[0]), Open: r[1], High: r[2], Low: r[3], Close: r[4], Volume: r[5],
		})
	}
	return resp
}

func demoRugCheck() *tollgatev1.GetRugCheckResponse {
	name, symbol := "Moon Cat", "MCAT"
	return &tollgatev1.GetRugCheckResponse{
		Token:   "0x4F9A8c7E2b1D3F6A5c0e9b8d7a6C5e4F3b2a1D0C",
		Name:    &name,
		Symbol:  &symbol,
		Verdict: tollgatev1.Verdict_VERDICT_FAIL,
		Flags:   []string{"blacklist", "creator-holds", "deployer-pulled", "fee-setter", "high-tax", "liquidity-unlocked", "mintable", "owner-active"},
		Checks: &tollgatev1.RugChecks{
			CodeHash: "0x9b1c5f0e3a7d2c4b6e8f0a1b3c5d7e9f1a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d",
			CodeSize: 7412,
			Capabilities: []*tollgatev1.Capability{
				{Class: tollgatev1.CapabilityClass_CAPABILITY_CLASS_MINT, Selectors: []string{"0x40c10f19"}, Signatures: []string{"mint(address,uint256)"}, Source: "token"},
				{Class: tollgatev1.CapabilityClass_CAPABILITY_CLASS_BLACKLIST, Selectors: []string{"0x00b8cf2a", "0x6b999053"}, Signatures: []string{"blockBots(address[])", "unblockBot(address)"}, Source: "token"},
				{Class: tollgatev1.CapabilityClass_CAPABILITY_CLASS_FEE, Selectors: []string{"0xc647b20e"}, Signatures: []string{"setTaxes(uint256,uint256)"}, Source: "token"},
			},
			Owner: &tollgatev1.OwnerInfo{
				Address:   wrapperspb.String("0x8ba1f109551bD432803012645Ac136ddd64DBA72"),
				Source:    "owner()",
				Renounced: false,
			},
			Activity: &tollgatev1.TransferActivity{
				WindowBlocks: 43200, FromBlock: 38451000, ToBlock: 38494200,
				Transfers: 1287, UniqueSenders: 214, UniqueReceivers: 391,
			},
			Trading: &tollgatev1.TradingState{
				Pool: wrapperspb.String("0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238"), Venue: "v2",
				BuyTaxPct: wrapperspb.Double(5), SellTaxPct: wrapperspb.Double(25), TransferTaxPct: wrapperspb.Double(0),
				TradingOpen: wrapperspb.Bool(true), TransfersPaused: wrapperspb.Bool(false),
				MaxBuy:          &tollgatev1.TradeLimit{Pct: wrapperspb.Double(1), ProbedPct: 2, Read: true},
				MaxSale:         &tollgatev1.TradeLimit{Pct: wrapperspb.Double(1), ProbedPct: 2, Read: true},
				MaxWallet:       &tollgatev1.TradeLimit{Pct: wrapperspb.Double(2), ProbedPct: 4, Read: true},
				CooldownSeconds: wrapperspb.UInt32(30), PositionPct: 0.1,
				Probes: []*tollgatev1.TradeProbe{
					{Call: "buy", How: "transfer(buyer, 1000000000000000000000000) called by the pool's holder 0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238", Status: tollgatev1.ProbeStatus_PROBE_STATUS_PASSES},
					{Call: "sale", How: "transferFrom(buyer, 0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238, 950000000000000000000000) called by a router, 30 s after the buy", Status: tollgatev1.ProbeStatus_PROBE_STATUS_PASSES},
					{Call: "transfer", How: "transfer(a fresh account, 475000000000000000000000) called by the buyer, 30 s after the buy", Status: tollgatev1.ProbeStatus_PROBE_STATUS_PASSES},
				},
				Unread: []string{},
			},
			Holders: &tollgatev1.HolderShares{
				Top: []*tollgatev1.HolderShare{
					{Address: "0x8ba1f109551bD432803012645Ac136ddd64DBA72", Balance: "310000000000000000000000000", Pct: 34.4},
					{Address: "0x28C6c06298d514Db089934071355E5743bf21d60", Balance: "42000000000000000000000000", Pct: 4.67},
				},
				Top10Pct: 52.1,
				Owner:    &tollgatev1.HolderShare{Address: "0x8ba1f109551bD432803012645Ac136ddd64DBA72", Balance: "310000000000000000000000000", Pct: 34.4},
				Deployer: &tollgatev1.HolderShare{Address: "0x8ba1f109551bD432803012645Ac136ddd64DBA72", Balance: "310000000000000000000000000", Pct: 34.4},
				Count:    391, CountExact: true,
				Excluded: []*tollgatev1.HolderShare{{Address: "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238", Balance: "98000000000000000000000000", Pct: 10.9,
					Why: "a pool of the token (v2, 0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238)"}},
				Burned: []*tollgatev1.HolderShare{{Address: "0x000000000000000000000000000000000000dEaD", Balance: "100000000000000000000000000", Pct: 10}},
				Logs:   1287,
			},
			Deployer: &tollgatev1.DeployerRecord{
				Address: wrapperspb.String("0x8ba1f109551bD432803012645Ac136ddd64DBA72"), Source: "creation",
				Transaction: wrapperspb.String("0x5f1e1c6a3b2d4e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f"), Block: 38450711,
				Tokens: []*tollgatev1.DeployedToken{{Token: "0x9f8F72aA9304c8B593d555F12eF6589cC3A579A2", Pool: "0x7a250d5630B4cF539739dF2C5dAcb4c659F2488D", Created: 38210032,
					Collapse: &tollgatev1.PoolCollapse{Pool: "0x7a250d5630B4cF539739dF2C5dAcb4c659F2488D", Kind: "liquidity", Block: 38240877, Venue: "v2"}, Recent: true}},
				PulledRecently: true,
			},
			Liquidity: []*tollgatev1.PoolLiquidity{{
				Pool: "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238", Venue: "v2",
				QuoteReserve: wrapperspb.String("14200000000000000000"), QuoteAtCreation: wrapperspb.String("10000000000000000000"), QuoteRemoved: wrapperspb.String("0"),
				DeployerPct: 100, Locks: []*tollgatev1.LiquidityLock{}, Unread: []string{},
			}},
		},
		AsOf: demoAsOf,
	}
}

func demoWhales() *tollgatev1.GetWhalesResponse {
	return &tollgatev1.GetWhalesResponse{
		AsOf:          demoAsOf,
		TokensScanned: 184,
		Wallets: []*tollgatev1.WhaleWallet{
			{Address: "0x3f5CE5FBFe3E9af3971dD833D26bA9b5C936f0bE", Score: 8.7, SmartEntries: 9, TokensCrossed: 12, EarlyRate: 0.75, DodgeRate: 0.83,
				EvidenceTokens: []string{"0x4F9A8c7E2b1D3F6A5c0e9b8d7a6C5e4F3b2a1D0C", "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238", "0x7a250d5630B4cF539739dF2C5dAcb4c659F2488D"}},
			{Address: "0x28C6c06298d514Db089934071355E5743bf21d60", Score: 6.2, SmartEntries: 6, TokensCrossed: 10, EarlyRate: 0.6, DodgeRate: 0.67,
				EvidenceTokens: []string{"0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238", "0x9f8F72aA9304c8B593d555F12eF6589cC3A579A2"}},
			{Address: "0xDFd5293D8e347dFe59E90eFd55b2956a1343963d", Score: 4.9, SmartEntries: 4, TokensCrossed: 7, EarlyRate: 0.57, DodgeRate: 0.5,
				EvidenceTokens: []string{"0x9f8F72aA9304c8B593d555F12eF6589cC3A579A2"}},
		},
	}
}

func demoSignal() *tollgatev1.GetSignalResponse {
	return &tollgatev1.GetSignalResponse{
		Product:           "ETH-USD",
		Gate:              tollgatev1.Gate_GATE_GO,
		Regime:            tollgatev1.Regime_REGIME_TREND_UP,
		ExpectedReturnPct: wrapperspb.Double(0.84),
		Rsi:               61.84,
		EmaGapPct:         0.93,
		Source:            "coinbase-exchange",
		Provenance: &tollgatev1.SignalProvenance{
			TotalCloses: 42,
			Lanes:       map[string]uint32{"eth-momentum": 27, "eth-meanrev": 15},
		},
		AsOf: demoAsOf,
	}
}

func demoSignalPack() *tollgatev1.GetSignalPackResponse {
	return &tollgatev1.GetSignalPackResponse{
		Product:    "ETH-USD",
		Close:      3458.93,
		Components: 4,
		Regime:     tollgatev1.Regime_REGIME_TREND_UP,
		Rsi:        &tollgatev1.RsiBlock{Value: 61.84, Delta3: 4.12, Period: 14},
		EmaGap:     &tollgatev1.EmaGapBlock{Pct: 0.93, SlopePct: 0.07, Ema10: 3441.27, Ema30: 3409.66},
		Volatility: &tollgatev1.VolatilityBlock{
			Flag:                tollgatev1.VolatilityFlag_VOLATILITY_FLAG_NORMAL,
			Realized_24HPct:     wrapperspb.Double(2.41),
			BaselineMedianPct:   wrapperspb.Double(2.65),
			Ratio:               wrapperspb.Double(0.91),
			BaselineWindowHours: 720,
		},
		Confidence: &tollgatev1.ConfidenceBlock{
			Score:    3,
			Max:      4,
			Agree:    []string{"emaGap", "emaSlope", "rsi"},
			Disagree: []string{"rsiMomentum"},
		},
		Inputs: &tollgatev1.SignalPackInputs{
			Source:      "coinbase-exchange",
			Synthetic:   false,
			Product:     "ETH-USD",
			Granularity: 3600,
			WindowHours: 720,
			Closes:      720,
			FirstCandle: "2026-10-21T12:00:00Z",
			LastCandle:  "2026-11-20T11:00:00Z",
			Thresholds:  rules.Thresholds(),
		},
		AsOf:       demoAsOf,
		Disclaimer: packDisclaimer,
	}
}

func demoToken() *tollgatev1.GetTokenResponse {
	name, symbol, supply := "USD Coin", "USDC", "4186250187731244"
	decimals := int32(6)
	return &tollgatev1.GetTokenResponse{
		Token: &tollgatev1.TokenInfo{
			Address:     "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
			Name:        &name,
			Symbol:      &symbol,
			Decimals:    &decimals,
			TotalSupply: &supply,
		},
		Transfers: &tollgatev1.TokenTransfers{WindowBlocks: 1800, Count: 48213, UniqueSenders: 9120, UniqueReceivers: 11876},
		AsOf:      demoAsOf,
	}
}

func demoRegime() *tollgatev1.GetRegimeResponse {
	return &tollgatev1.GetRegimeResponse{
		Regime: tollgatev1.Regime_REGIME_TREND_UP,
		Price:  3458.93,
		Ema10:  3441.27,
		Ema30:  3409.66,
		Rsi14:  61.84,
		AsOf:   demoAsOf,
		Source: "coinbase-exchange",
	}
}

func demoLanes() *tollgatev1.GetLanesResponse {
	return &tollgatev1.GetLanesResponse{
		Lanes: map[string]*tollgatev1.LaneRecord{
			"eth-momentum": {Closes: 27, LastClose: wrapperspb.String("2026-11-20T09:14:03Z")},
			"eth-meanrev":  {Closes: 15, LastClose: wrapperspb.String("2026-11-19T22:41:57Z")},
			"btc-breakout": {Closes: 0, LastClose: nil},
		},
		TotalCloses: 42,
		Chain:       network,
		Disclaimer:  "Counts of closes from the operator's own trade tape. Not a track record: no win rate, no profit and loss.",
		AsOf:        demoAsOf,
	}
}

func demoForecast() *tollgatev1.GetForecastResponse {
	closes := []float64{
		97412.5, 97455.1, 97490.8, 97531.2, 97560.9, 97602.4, 97633.0, 97671.8,
		97700.3, 97738.6, 97765.2, 97801.9, 97826.4, 97860.7, 97883.1, 97915.8,
		97936.2, 97966.5, 97985.0, 98012.9, 98029.6, 98055.4, 98070.2, 98094.1,
	}
	return &tollgatev1.GetForecastResponse{
		Product:           "BTC-USD",
		LastClose:         97380.0,
		Closes:            closes,
		ExpectedReturnPct: 0.7333,
		PredLen:           int32(len(closes)),
		Cached:            false,
		Source:            "coinbase-exchange",
		AsOf:              demoAsOf,
		Model:             "embedded-damped-holt",
	}
}
