// Command benchgate is the benchmark regression gate of `make
// bench-compare`: it reads two files of Go benchmark results (base and
// head, several runs each, as written by go test -bench) with
// golang.org/x/perf/benchfmt, compares each benchmark's median with
// benchmath (Mann-Whitney U test), and exits with status 1 when head
// regresses beyond the limits:
//
//   - the geometric mean over all tracked benchmarks rises by more than
//     -geomean and the rise is significant at -alpha (U test on the
//     per-run geomeans), or
//   - one benchmark's median rises by more than -single and the U test
//     finds the difference significant at -alpha.
//
// The default limits come from A/A runs (the same commit against itself,
// alternating, on the shared 2-core machine): see results/README.md.
//
// Usage:
//
//	benchgate [-geomean 0.10] [-single 0.30] [-alpha 0.01] [-unit sec/op] [-match regexp] base.txt head.txt
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
)

func main() {
	lim := Limits{}
	flag.Float64Var(&lim.Geomean, "geomean", defaultGeomean, "largest accepted geomean rise (0.10 = +10%)")
	flag.Float64Var(&lim.Single, "single", defaultSingle, "largest accepted rise of one benchmark when significant")
	flag.Float64Var(&lim.Alpha, "alpha", defaultAlpha, "significance level of the U test")
	flag.StringVar(&lim.Unit, "unit", "sec/op", "unit compared (tidied: ns/op reads as sec/op)")
	match := flag.String("match", "", "keep only benchmarks whose full name matches this regexp")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: benchgate [flags] base.txt head.txt")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	if *match != "" {
		re, err := regexp.Compile(*match)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchgate:", err)
			os.Exit(2)
		}
		lim.Match = re
	}
	base, head, err := openBoth(flag.Arg(0), flag.Arg(1))
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchgate:", err)
		os.Exit(2)
	}
	defer base.Close()
	defer head.Close()
	v, err := Compare(base, head, lim)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	v.Print(os.Stdout, lim)
	if v.Failed {
		os.Exit(1)
	}
}

// Default limits, from the A/A noise measured in results/README.md.
const (
	defaultGeomean = 0.10
	defaultSingle  = 0.30
	defaultAlpha   = 0.01
)
