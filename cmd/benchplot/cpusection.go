package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// peerBackend names, in server/ file names, the rows of the server serving
// from a2a-go's taskstore.InMemory (a2astore-server -a2a-inmemory).
const peerBackend = "a2a_inmemory"

// cpuSection is "Where a served request's CPU goes": per profiled row, its
// server CPU by owner (cpuowners.go), then a2astore's store beside a2a-go's
// InMemory behind the same server.
func cpuSection(r *run, rel string) string {
	var b strings.Builder
	var rows []serverRun
	for _, s := range append(sortedServer(r), sortedPeer(r)...) {
		if s.CPU != nil {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		b.WriteString("The newest run has no CPU profiles of the server: runs recorded before `make results` took them have none.\n")
	}
	for _, s := range rows {
		ownerTable(&b, s, rel)
	}
	b.WriteString("\n")
	peerTable(&b, r)
	return b.String()
}

func sortedPeer(r *run) []serverRun {
	s := slices.Clone(r.Peer)
	slices.SortStableFunc(s, func(a, b serverRun) int { return -strings.Compare(a.Workload, b.Workload) })
	return s
}

// rowName is how the section names a server row's store.
func rowName(s serverRun) string {
	if s.Backend == peerBackend {
		return "a2a-go InMemory"
	}
	return "a2astore " + s.Backend
}

func methodOf(workload string) string {
	if m := workloadMethod[workload]; m != "" {
		return m
	}
	return workload
}

// ownerTable writes one row's CPU by owner: share of the profile, µs per
// request (the share of the row's measured CPU per request), and the
// owners above each owner's frames.
func ownerTable(b *strings.Builder, s serverRun, rel string) {
	c := s.CPU
	perReq, hasCPU := s.CPUPerRequest()
	file := fmt.Sprintf("%s-%s-%s.pprof", s.Backend, s.Transport, s.Workload)
	fmt.Fprintf(b, "\n**%s, %s** (%s): ", rowName(s), methodOf(s.Workload), s.Transport)
	if hasCPU {
		fmt.Fprintf(b, "%s µs of server CPU per request; ", formatSig(perReq))
	}
	fmt.Fprintf(b, "profile of %.0f s, %.1f s of CPU sampled ([`%s`](%s/server/%s)).\n\n",
		c.Duration.Seconds(), float64(c.Total)/1e9, file, rel, file)
	b.WriteString("| owner | CPU share | µs per request | called from |\n|---|---:|---:|---|\n")
	for o := range numOwners {
		us := "—"
		if hasCPU {
			us = formatSig(c.Share(o) * perReq)
		}
		fmt.Fprintf(b, "| %s | %s %% | %s | %s |\n", o, formatPercent(c.Share(o)), us, callersCell(c, o))
	}
}

// callersCell lists the owners above o's frames that hold at least 5 % of
// o's CPU, largest first, with the part that has no owner above ("none
// above": a goroutine's own root, as net/http's connection reader) when
// another is listed.
func callersCell(c *cpuSplit, o owner) string {
	total := c.Owner[o]
	if total == 0 {
		return "—"
	}
	type share struct {
		name string
		v    int64
	}
	var shares []share
	for who, v := range c.Caller[o] {
		if v*20 >= total && v > 0 {
			name := "none above"
			if who < int(numOwners) {
				name = owner(who).String()
			}
			shares = append(shares, share{name, v})
		}
	}
	if len(shares) == 0 || (len(shares) == 1 && shares[0].name == "none above") {
		return "—"
	}
	slices.SortStableFunc(shares, func(a, b share) int { return cmp.Compare(b.v, a.v) })
	var parts []string
	for _, sh := range shares {
		parts = append(parts, fmt.Sprintf("%s %s %%", sh.name, formatPercent(float64(sh.v)/float64(total))))
	}
	return strings.Join(parts, ", ")
}

// formatPercent prints a share as a percentage, one decimal.
func formatPercent(v float64) string {
	return fmt.Sprintf("%.1f", 100*v)
}

// peerTable sets a2astore's mem store beside a2a-go's InMemory behind the
// same server, row by row.
func peerTable(b *strings.Builder, r *run) {
	peers := sortedPeer(r)
	if len(peers) == 0 {
		b.WriteString("The newest run has no rows of the server on a2a-go's InMemory: runs recorded before `make results` measured them have none.\n")
		return
	}
	b.WriteString("a2astore's store (mem) and a2a-go's `taskstore.InMemory` behind the same server (`-a2a-inmemory`), same rows:\n\n")
	b.WriteString("| method | transport | task store | round trips/s | server CPU µs/request | InMemory / a2astore | of which under the store, µs/request | created by the send row before |\n|---|---|---|---:|---:|---:|---:|---:|\n")
	for _, p := range peers {
		ours, ok := findServer(r.Server, "mem", p.Transport, p.Workload)
		if ok {
			peerRow(b, ours, ours, r.Server)
		}
		peerRow(b, p, ours, r.Peer)
	}
}

// peerRow writes one row of peerTable; base is a2astore's row of the same
// method (the ratio's denominator), rows the rows of s's server.
func peerRow(b *strings.Builder, s, base serverRun, rows []serverRun) {
	cpu, ok := s.CPUPerRequest()
	ratio, store, created := "", "—", "—"
	if s.Backend == peerBackend {
		ratio = "—"
		if bc, bok := base.CPUPerRequest(); ok && bok && bc > 0 {
			ratio = formatRatio(cpu/bc) + "×"
		}
	}
	if ok && s.CPU != nil && s.CPU.Total > 0 {
		store = formatSig(cpu * float64(s.CPU.Store) / float64(s.CPU.Total))
	}
	if send, sok := findServer(rows, s.Backend, s.Transport, "send-only"); sok && s.Workload != "send-only" {
		created = commas(float64(send.Res.Total.Count))
	}
	fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", methodOf(s.Workload), s.Transport, rowName(s),
		commas(s.Res.Total.OpsPerSec), orDash(ok, formatSig(cpu)), ratio, store, created)
}

func findServer(rows []serverRun, backend, transport, workload string) (serverRun, bool) {
	for _, s := range rows {
		if s.Backend == backend && s.Transport == transport && s.Workload == workload {
			return s, true
		}
	}
	return serverRun{}, false
}
