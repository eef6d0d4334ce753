// Package kronos runs Kronos, the open foundation model for K-lines
// (github.com/shiyu-coder/Kronos, MIT; arXiv 2508.02739), in Go without cgo: it
// loads a published predictor and tokenizer checkpoint and forecasts
// candles as the reference's KronosPredictor.predict does: the same
// arithmetic in float32, so the same tokens and, up to float32 rounding,
// the same numbers (testdata/README.md describes the reference fixtures
// the tests compare against).
//
// The package owns the arithmetic and nothing else: Load reads two
// checkpoint directories (config.json + model.safetensors, the Hugging
// Face layout of NeoQuasar/Kronos-mini, -small, -base and
// Kronos-Tokenizer-2k, -base), and WriteRandom writes checkpoints of the
// same layout with random weights, for tests and speed measurements;
// those are its only I/O. Fetching candles, caching forecasts and serving
// them belong to the callers.
//
// The code follows the reference module by module, named as there:
//
//   - load.go: one struct per module, each field the tensor of that name;
//     the loader refuses any missing, misshapen, mistyped or unexpected
//     tensor (safetensors.go reads the file format).
//   - forecast.go: KronosPredictor.predict: the amount fill, z-score and
//     clip, time features, denormalisation.
//   - tokenizer.go: KronosTokenizer.encode and decode (binary spherical
//     quantisation into s1/s2 indices and back).
//   - predictor.go: Kronos.decode_s1 and decode_s2, and the
//     auto_regressive_inference loop with its 512-token window.
//   - transformer.go and ops.go: TransformerBlock (RMSNorm, RoPE attention,
//     SwiGLU) over a cache of keys and values, and the portable float32
//     kernels. kernels_amd64.s holds AVX2/FMA versions of the hot ones
//     (dot products, the linear layers' blocked product, attention's
//     weighted sum, the exponential of softmax and SwiGLU), chosen at run
//     time when the CPU has them, and kernels_arm64.s NEON versions of
//     the first three; the portable kernels are the fallback, what -tags
//     purego builds, and the tests' oracle. No cgo.
//   - random.go: random-weight checkpoints of any shape (WriteRandom).
//   - sample.go: sample_from_logits with top_k_top_p_filtering.
//
// Where it differs from the reference, it computes the same numbers with
// less work: while the window does not slide, each step runs one new row
// against cached keys and values instead of the whole window; the rows all
// sample paths share (the input candles) are computed once; and the heads
// run only at the rows whose logits are used. Once the window slides (more
// than 512 tokens), each step recomputes the window, as the reference does,
// because every position shifts.
package kronos
