package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// The tenancy benchmarks (#15), on a fixture whose tasks have owners
// (1,000 owners, Zipf-skewed: ownedFixture), at n = 1e5 and up:
//
//	op=page-owner/n=N/owners=1000/page=50/owner=O/proj=P    a page of 50 from a random position
//	op=total-owner/n=N/owners=1000/owner=O/filter=F         TotalSize alone (page of 1)
//	op=create-owner/n=N/owners=1000/owner=none|set          Create vs CreateOwned
//	op=replace-owner/n=N/owners=1000/owner=none|set         Replace of a task without vs with an owner
//
// owner=none is the unscoped list (the side-by-side baseline), owner=hot
// the busiest owner, owner=small the owner with the fewest tasks (one
// short page); owner=small/context=hot filters that owner by the busiest
// context, whose tasks are nearly all other owners' (the timing oracle of
// a scan). A store that is not an engine.OwnerStore skips them all.

// ownerSizes are the sizes of the run from 1e5 up, or the largest alone
// when the run has none that large.
func ownerSizes() []int {
	ns := sizes()
	big := slices.DeleteFunc(slices.Clone(ns), func(n int) bool { return n < 1e5 })
	if len(big) == 0 {
		return ns[len(ns)-1:]
	}
	return big
}

// forOwnerSizes is forSizes over ownerSizes, on owned fixtures.
func forOwnerSizes(b *testing.B, e *env, name func(n int) string, f func(b *testing.B, fx *fixture)) {
	for _, n := range ownerSizes() {
		b.Run(name(n), func(b *testing.B) { f(b, e.ownedFixture(b, n)) })
	}
}

// owners returns the busiest owner and the one with the fewest tasks, and
// the positions of each one's tasks in list order.
func (fx *fixture) owners() (hot, small string, at map[string][]int) {
	at = map[string][]int{}
	for i, o := range fx.owner {
		at[o] = append(at[o], i)
	}
	for o, pos := range at {
		switch {
		case o == "":
		case hot == "" || len(pos) > len(at[hot]) || len(pos) == len(at[hot]) && o < hot:
			hot = o
		}
		switch {
		case o == "":
		case small == "" || len(pos) < len(at[small]) || len(pos) == len(at[small]) && o < small:
			small = o
		}
	}
	return hot, small, at
}

// hotContext is the fixture's busiest context.
func (fx *fixture) hotContext() string {
	n := map[string]int{}
	hot := ""
	for _, c := range fx.ctx {
		n[c]++
		if hot == "" || n[c] > n[hot] || n[c] == n[hot] && c < hot {
			hot = c
		}
	}
	return hot
}

// ownerPages returns 1024 requests for pages of 50 of owner ("" =
// unscoped), each from a random position of that owner's list (every page
// full where the owner has more than 51 tasks; its first page otherwise).
func (fx *fixture) ownerPages(owner string, pos []int, proj engine.Projection) []engine.ListRequest {
	rng := rand.New(rand.NewPCG(31, 1))
	reqs := make([]engine.ListRequest, 1024)
	for i := range reqs {
		req := engine.ListRequest{PageSize: 50, Owner: owner, Projection: proj, IncludeArtifacts: true}
		if len(pos) > 51 {
			if k := rng.IntN(len(pos) - 51); k > 0 {
				req.PageToken = engine.EncodeToken(fx.order[pos[k-1]])
			}
		}
		reqs[i] = req
	}
	return reqs
}

func benchOwnerPage(b *testing.B, e *env) {
	for _, proj := range []engine.Projection{engine.ProjectionLight, engine.ProjectionFull} {
		for _, who := range []string{"none", "hot", "small", "small/context=hot"} {
			forOwnerSizes(b, e, func(n int) string {
				return fmt.Sprintf("op=page-owner/n=%d/owners=%d/page=50/owner=%s/proj=%s", n, benchOwners, who, projName(proj))
			}, func(b *testing.B, fx *fixture) {
				hot, small, at := fx.owners()
				var reqs []engine.ListRequest
				switch who {
				case "none":
					all := make([]int, fx.n)
					for i := range all {
						all[i] = i
					}
					reqs = fx.ownerPages("", all, proj)
				case "hot":
					reqs = fx.ownerPages(hot, at[hot], proj)
				case "small":
					reqs = fx.ownerPages(small, at[small], proj)
				default:
					reqs = fx.ownerPages(small, nil, proj)
					for i := range reqs {
						reqs[i].ContextID = fx.hotContext()
					}
				}
				benchList(b, fx.store, func(i int) *engine.ListRequest { return &reqs[i%len(reqs)] })
			})
		}
	}
}

func benchOwnerTotal(b *testing.B, e *env) {
	for _, who := range []string{"none", "hot", "small"} {
		for _, filter := range []string{"none", "state", "context"} {
			forOwnerSizes(b, e, func(n int) string {
				return fmt.Sprintf("op=total-owner/n=%d/owners=%d/owner=%s/filter=%s", n, benchOwners, who, filter)
			}, func(b *testing.B, fx *fixture) {
				hot, small, _ := fx.owners()
				req := engine.ListRequest{Owner: map[string]string{"none": "", "hot": hot, "small": small}[who],
					IncludeTotalSize: true, PageSize: 1, Projection: engine.ProjectionLight}
				switch filter {
				case "state":
					req.Status = a2a.TaskStateWorking
				case "context":
					req.ContextID = fx.hotContext()
				}
				benchList(b, fx.store, func(int) *engine.ListRequest { return &req })
			})
		}
	}
}

// benchOwnerCreate: Create (owner=none) against CreateOwned for an owner
// drawn like the fixture's (owner=set), on the same store; the created
// tasks are deleted after the loop (untimed).
func benchOwnerCreate(b *testing.B, e *env) {
	for _, who := range []string{"none", "set"} {
		forOwnerSizes(b, e, func(n int) string {
			return fmt.Sprintf("op=create-owner/n=%d/owners=%d/owner=%s", n, benchOwners, who)
		}, func(b *testing.B, fx *fixture) {
			ctx := context.Background()
			s := fx.store.(engine.OwnerStore)
			owners := drawOwners(4096, benchOwners)
			var made []a2a.TaskID
			b.ReportAllocs()
			for b.Loop() {
				id := a2a.TaskID("bench-owned-" + strconv.FormatInt(seq.Add(1), 10))
				owner := ""
				if who == "set" {
					owner = owners[len(made)%len(owners)]
				}
				if _, err := s.CreateOwned(ctx, fx.task(len(made), id), owner); err != nil {
					b.Fatal(err)
				}
				made = append(made, id)
			}
			for _, id := range made {
				if err := s.Delete(ctx, id); err != nil && !errors.Is(err, engine.ErrNotFound) {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchOwnerReplace: unconditional Replace of a task without an owner
// (owner=none: 4,096 such tasks are created first and deleted after,
// untimed) against one with an owner (owner=set: the fixture's own), on
// the same store.
func benchOwnerReplace(b *testing.B, e *env) {
	for _, who := range []string{"none", "set"} {
		forOwnerSizes(b, e, func(n int) string {
			return fmt.Sprintf("op=replace-owner/n=%d/owners=%d/owner=%s", n, benchOwners, who)
		}, func(b *testing.B, fx *fixture) {
			ctx := context.Background()
			ids := fx.ids(4096, 23)
			if who == "none" {
				for i := range ids {
					ids[i] = a2a.TaskID("bench-unowned-" + strconv.FormatInt(seq.Add(1), 10))
					if _, err := fx.store.Create(ctx, fx.task(i, ids[i])); err != nil {
						b.Fatal(err)
					}
				}
				defer func() {
					for _, id := range ids {
						if err := fx.store.Delete(ctx, id); err != nil {
							b.Fatal(err)
						}
					}
				}()
			}
			replaceIDs(b, context.Background(), fx, ids)
		})
	}
}
