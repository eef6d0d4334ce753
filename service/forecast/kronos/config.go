package kronos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// ModelConfig is the predictor's config.json, as the reference's
// save_pretrained writes it (class Kronos). Dropout rates are accepted and
// ignored: inference runs without dropout.
type ModelConfig struct {
	S1Bits  int  `json:"s1_bits"`
	S2Bits  int  `json:"s2_bits"`
	NLayers int  `json:"n_layers"`
	DModel  int  `json:"d_model"`
	NHeads  int  `json:"n_heads"`
	FFDim   int  `json:"ff_dim"`
	LearnTE bool `json:"learn_te"` // learned temporal embeddings; else fixed sinusoids (stored as well)
}

// TokenizerConfig is the tokenizer's config.json (class KronosTokenizer).
// The quantiser's loss weights (beta, gamma0, gamma, zeta) only matter in
// training and are ignored.
type TokenizerConfig struct {
	DIn        int `json:"d_in"`
	DModel     int `json:"d_model"`
	NHeads     int `json:"n_heads"`
	FFDim      int `json:"ff_dim"`
	NEncLayers int `json:"n_enc_layers"` // the encoder has NEncLayers-1 blocks
	NDecLayers int `json:"n_dec_layers"` // the decoder has NDecLayers-1 blocks
	S1Bits     int `json:"s1_bits"`
	S2Bits     int `json:"s2_bits"`
	GroupSize  int `json:"group_size"`
}

// depHeads is the head count of the predictor's dependency-aware layer: the
// reference builds DependencyAwareLayer(d_model) and so takes its default of
// 4 heads whatever n_heads says.
const depHeads = 4

// numFeatures is the tokenizer's input width: open, high, low, close,
// volume, amount.
const numFeatures = 6

// readConfig decodes dir/config.json into v, requiring every field in
// required to be present.
func readConfig(dir string, v any, required []string) error {
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return &CheckpointError{Path: path, Err: ErrConfig, Detail: err.Error()}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return &CheckpointError{Path: path, Err: ErrConfig, Detail: err.Error()}
	}
	for _, f := range required {
		if _, ok := fields[f]; !ok {
			return &CheckpointError{Path: path, Err: ErrConfig, Detail: fmt.Sprintf("field %q is missing", f)}
		}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return &CheckpointError{Path: path, Err: ErrConfig, Detail: err.Error()}
	}
	return nil
}

func (c ModelConfig) validate() error {
	switch {
	case c.S1Bits < 1 || c.S1Bits > 16 || c.S2Bits < 1 || c.S2Bits > 16:
		return fmt.Errorf("s1_bits %d and s2_bits %d must be within 1..16", c.S1Bits, c.S2Bits)
	case c.NLayers < 1:
		return fmt.Errorf("n_layers %d must be positive", c.NLayers)
	case c.DModel < 1 || c.NHeads < 1 || c.FFDim < 1:
		return fmt.Errorf("d_model %d, n_heads %d and ff_dim %d must be positive", c.DModel, c.NHeads, c.FFDim)
	case c.DModel%c.NHeads != 0 || (c.DModel/c.NHeads)%2 != 0:
		return fmt.Errorf("d_model %d must split into %d heads of even width", c.DModel, c.NHeads)
	case c.DModel%depHeads != 0 || (c.DModel/depHeads)%2 != 0:
		return fmt.Errorf("d_model %d must split into the dependency layer's %d heads of even width", c.DModel, depHeads)
	}
	return nil
}

func (c TokenizerConfig) validate() error {
	switch {
	case c.DIn != numFeatures:
		return fmt.Errorf("d_in %d: the predictor feeds %d features", c.DIn, numFeatures)
	case c.S1Bits < 1 || c.S1Bits > 16 || c.S2Bits < 1 || c.S2Bits > 16:
		return fmt.Errorf("s1_bits %d and s2_bits %d must be within 1..16", c.S1Bits, c.S2Bits)
	case c.NEncLayers < 1 || c.NDecLayers < 1:
		return fmt.Errorf("n_enc_layers %d and n_dec_layers %d must be positive", c.NEncLayers, c.NDecLayers)
	case c.DModel < 1 || c.NHeads < 1 || c.FFDim < 1 || c.GroupSize < 1:
		return fmt.Errorf("d_model %d, n_heads %d, ff_dim %d and group_size %d must be positive", c.DModel, c.NHeads, c.FFDim, c.GroupSize)
	case c.DModel%c.NHeads != 0 || (c.DModel/c.NHeads)%2 != 0:
		return fmt.Errorf("d_model %d must split into %d heads of even width", c.DModel, c.NHeads)
	}
	return nil
}
