package catalog

import "testing"

func TestValidPrice(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"0.02": true, "1": true, "0.000001": true, "12.5": true,
		"": false, "0": false, "0.00": false, "-1": false, "+1": false, "1e-2": false,
		".5": false, "0.0000001": false, "1.2.3": false, "0,02": false, " 1": false,
	} {
		if got := validPrice(s); got != want {
			t.Errorf("validPrice(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestTemplateVars(t *testing.T) {
	t.Parallel()
	got := templateVars("/rugcheck/{addr}/x/{op=*}")
	if len(got) != 2 || !got["addr"] || !got["op"] {
		t.Errorf("templateVars = %v", got)
	}
}
