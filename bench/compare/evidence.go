package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

// observationJSON writes an observation-like document of at most size
// bytes (per challenge: a baseline and a candidate with hex roots, claim
// ids, counts, a float, a verdict, a refusal set with escapes and
// non-ASCII), one member per line.
func observationJSON(size int) []byte {
	r := rand.New(rand.NewPCG(11, 5))
	hex := func(prefix string) string {
		const digits = "0123456789abcdef"
		b := []byte(prefix)
		for range 64 {
			b = append(b, digits[r.IntN(16)])
		}
		return string(b)
	}
	side := func(verdict string) string {
		s := fmt.Sprintf(`{"D":{"artifact_root":"%s","nested_claim_sem_id":"%s","structure":{"edges":%d,"unique_artifacts":%d,"ratio":%v}`,
			hex("root-"), hex("nclaim-"), r.IntN(1000), r.IntN(1000), r.Float64())
		if verdict != "" {
			s += `,"verdict":"` + verdict + `"`
		}
		return s + "}}"
	}
	var b strings.Builder
	b.WriteString(`{"type":"TRVM-HOLDOUT-OBSERVATION-v1","implementation":"bench","observations":{` + "\n")
	const tail = "\n}}\n"
	for i := 0; ; i++ {
		refusals := `[]`
		if r.IntN(3) == 0 {
			refusals = `["refusal-code-é-\u2028","escaped \"quote\" and \\ back\tslash"]`
		}
		e := fmt.Sprintf(`"S%06d":{"baseline":%s,"candidate":%s,"fixture_root":"%s","refusal_set":%s}`, i, side(""), side([]string{"VERIFIED", "REFUSED"}[r.IntN(2)]), hex("root-"), refusals)
		if i > 0 {
			e = ",\n" + e
		}
		if b.Len()+len(e)+len(tail) > size {
			break
		}
		b.WriteString(e)
	}
	b.WriteString(tail)
	return []byte(b.String())
}

// nodeParse is the Node side: read the file as a string once (not timed:
// JSON.parse takes a string, the Go readers take bytes), warm up, then
// time iters parses and print the mean nanoseconds per parse.
const nodeParse = `
const fs = require('fs');
const s = fs.readFileSync(process.argv[1], 'utf8');
const iters = +process.argv[2];
for (let i = 0; i < 2; i++) JSON.parse(s);
if (global.gc) global.gc();
const t0 = process.hrtime.bigint();
let n = 0;
for (let i = 0; i < iters; i++) n += Object.keys(JSON.parse(s).observations).length;
const t1 = process.hrtime.bigint();
if (n === 0) throw new Error('nothing parsed');
console.log(String((t1 - t0) / BigInt(iters)));
`

func evidenceRows(c *config) []Row {
	sizes := []struct {
		name  string
		size  int
		iters int
	}{{"1 MiB", 1 << 20, 10}, {"8 MiB", evidence.MaxSize, 3}}
	if c.quick {
		sizes = sizes[:1]
		sizes[0].iters = 2
	}
	_, nodeErr := exec.LookPath("node")
	var rows []Row
	for _, s := range sizes {
		doc := observationJSON(s.size)
		path := filepath.Join(c.tmp, "obs.json")
		work := fmt.Sprintf("strict evidence read (`evidence.Read`), %s observation-like document", s.name)
		fail := func(err error) Row {
			return Row{Issue: 2, Work: work, Clean: "—", Peer: "—", Ratio: "—", Target: "≤ 1.5× encoding/json", Verdict: notMeasured + ": " + err.Error()}
		}
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			rows = append(rows, fail(err))
			continue
		}
		goBlock := func(read func() error) func() (time.Duration, error) {
			return func() (time.Duration, error) {
				runtime.GC() // the previous block's garbage is not this one's cost
				t0 := time.Now()
				for range s.iters {
					if err := read(); err != nil {
						return 0, err
					}
				}
				return time.Since(t0) / time.Duration(s.iters), nil
			}
		}
		strict := goBlock(func() error { _, err := evidence.Read(doc); return err })
		lenient := goBlock(func() error { var v any; return json.Unmarshal(doc, &v) })
		node := func() (time.Duration, error) {
			out, err := exec.Command("node", "--expose-gc", "-e", nodeParse, path, strconv.Itoa(s.iters)).Output()
			if err != nil {
				return 0, fmt.Errorf("node JSON.parse: %w", err)
			}
			ns, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
			return time.Duration(ns), err
		}
		fns := []func() (time.Duration, error){strict, lenient}
		if nodeErr == nil {
			fns = append(fns, node)
		}
		ds, err := alternate(c.rounds, fns...)
		if err != nil {
			rows = append(rows, fail(err))
			continue
		}
		ts, tl := median(ds[0]), median(ds[1])
		mbs := func(d time.Duration) string {
			return fmt.Sprintf("%s (%.0f MB/s)", ms(d), float64(len(doc))/d.Seconds()/1e6)
		}
		rows = append(rows, Row{Issue: 2, Work: work + " vs `encoding/json` Unmarshal into any", Clean: mbs(ts), Peer: mbs(tl),
			Ratio: fmt.Sprintf("%.2f×", float64(ts)/float64(tl)), Target: "≤ 1.5× encoding/json", Verdict: verdict(float64(ts) <= 1.5*float64(tl))})
		if nodeErr == nil {
			tn := median(ds[2])
			rows = append(rows, Row{Issue: 2, Work: fmt.Sprintf("strict evidence read, %s, vs Node `JSON.parse` (same bytes, string decoded outside the timing)", s.name), Clean: mbs(ts), Peer: mbs(tn),
				Ratio: fmt.Sprintf("%.2f×", float64(ts)/float64(tn)), Target: "— (reported)", Verdict: reported})
		}
	}
	return rows
}
