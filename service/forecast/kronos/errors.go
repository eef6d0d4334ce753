package kronos

import (
	"errors"
	"fmt"
)

// Sentinel errors. Load returns a *CheckpointError that wraps one of the
// checkpoint sentinels; Forecast wraps ErrInvalidInput.
var (
	// ErrConfig: config.json is missing, malformed, or describes a model this
	// package cannot run.
	ErrConfig = errors.New("bad config")
	// ErrFormat: model.safetensors is not a well-formed safetensors file.
	ErrFormat = errors.New("malformed safetensors")
	// ErrMissingTensor: the architecture needs a tensor the file lacks.
	ErrMissingTensor = errors.New("missing tensor")
	// ErrShape: a tensor's shape differs from what the config implies.
	ErrShape = errors.New("wrong shape")
	// ErrDType: a tensor's dtype cannot be used (weights must be F32, F16
	// or BF16; integer buffers I64).
	ErrDType = errors.New("wrong dtype")
	// ErrUnexpectedTensor: the file holds a tensor the architecture has no
	// place for.
	ErrUnexpectedTensor = errors.New("unexpected tensor")
	// ErrMismatch: the model and the tokenizer do not belong together.
	ErrMismatch = errors.New("model and tokenizer do not match")

	// ErrInvalidInput: the candles, times or options given to Forecast
	// cannot be used.
	ErrInvalidInput = errors.New("kronos: invalid input")
)

// CheckpointError says which file (and which tensor, if any) Load refused
// and why. Err is one of the checkpoint sentinels above.
type CheckpointError struct {
	Path   string // the file concerned
	Tensor string // the tensor concerned, empty for file-level problems
	Err    error
	Detail string
}

func (e *CheckpointError) Error() string {
	s := "kronos: " + e.Path + ": "
	if e.Tensor != "" {
		s += fmt.Sprintf("tensor %q: ", e.Tensor)
	}
	s += e.Err.Error()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *CheckpointError) Unwrap() error { return e.Err }

func invalidInput(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}
