package main

// shortHex abbreviates a digest for one-line output.
func shortHex(h string) string {
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
}
