package load

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
)

// page is one list page as the checker sees it.
type page struct {
	ids     []a2a.TaskID
	cursors []engine.Cursor // one per task when the target knows them (embedded); else nil
	next    string
	total   int
}

// target is what workers drive: an embedded engine.Store or a remote server.
type target interface {
	// create stores a new task (task.ID may be replaced by the server) and
	// returns its ID.
	create(ctx context.Context, task *a2a.Task) (a2a.TaskID, error)
	get(ctx context.Context, id a2a.TaskID) error
	replace(ctx context.Context, task *a2a.Task) error
	appendHistory(ctx context.Context, id a2a.TaskID, msg *a2a.Message) error
	cancel(ctx context.Context, id a2a.TaskID) error
	delete(ctx context.Context, id a2a.TaskID) error
	list(ctx context.Context, contextID, token string, pageSize int, totals bool) (page, error)
	supports(op Op) bool
	// assignsIDs reports whether the target picks a new task's ID (a
	// remote server: SendMessage creates the task), so the ID is known
	// only once create returns.
	assignsIDs() bool
}

// storeTarget drives an engine.Store in process. With caller identities
// (ids.any) the store is an authz dispatcher under OwnerPolicy, and each
// call carries its caller (authz.WithCaller): the owner of the task's
// context, who created the task.
type storeTarget struct {
	s   engine.Store
	ids *callers
}

// as returns ctx carrying caller, when there is one.
func (t storeTarget) as(ctx context.Context, caller string) context.Context {
	if caller == "" {
		return ctx
	}
	return authz.WithCaller(ctx, caller)
}

func (t storeTarget) create(ctx context.Context, task *a2a.Task) (a2a.TaskID, error) {
	caller := t.ids.forContext(task.ContextID)
	_, err := t.s.Create(t.as(ctx, caller), task)
	if err == nil {
		t.ids.created(task.ID, caller)
	}
	return task.ID, err
}

func (t storeTarget) get(ctx context.Context, id a2a.TaskID) error {
	_, err := t.s.Get(t.as(ctx, t.ids.ofTask(id)), id)
	return err
}

func (t storeTarget) replace(ctx context.Context, task *a2a.Task) error {
	_, err := t.s.Replace(t.as(ctx, t.ids.ofTask(task.ID)), task, 0)
	return err
}

func (t storeTarget) appendHistory(ctx context.Context, id a2a.TaskID, msg *a2a.Message) error {
	_, err := t.s.AppendHistory(t.as(ctx, t.ids.ofTask(id)), id, msg)
	return err
}

func (t storeTarget) cancel(ctx context.Context, id a2a.TaskID) error {
	_, err := t.s.Cancel(t.as(ctx, t.ids.ofTask(id)), id)
	return err
}

func (t storeTarget) delete(ctx context.Context, id a2a.TaskID) error {
	return t.s.Delete(t.as(ctx, t.ids.ofTask(id)), id)
}

func (t storeTarget) list(ctx context.Context, contextID, token string, pageSize int, totals bool) (page, error) {
	zero := 0
	resp, err := t.s.List(t.as(ctx, t.ids.forContext(contextID)), &engine.ListRequest{
		ContextID: contextID, PageSize: pageSize, PageToken: token,
		HistoryLength: &zero, IncludeTotalSize: totals,
	})
	if err != nil {
		return page{}, err
	}
	p := page{next: resp.NextPageToken, total: resp.TotalSize, cursors: resp.TaskCursors}
	for _, task := range resp.Tasks {
		p.ids = append(p.ids, task.ID)
	}
	if len(p.cursors) != len(p.ids) {
		return p, fmt.Errorf("list returned %d cursors for %d tasks: %w", len(p.cursors), len(p.ids), engine.ErrInternal)
	}
	return p, nil
}

func (storeTarget) supports(Op) bool { return true }

func (storeTarget) assignsIDs() bool { return false }

// remoteTarget drives an A2A server through the a2a-go client, or several
// servers of one cluster (Config.Target "http://a,http://b"), one call on
// each in turn, so a traversal's pages alternate between them.
type remoteTarget struct {
	cs   []*a2aclient.Client
	turn atomic.Uint64
	// Caller identities (Config.Caller, Config.Callers), sent in header.
	header string
	ids    *callers
	// push configures each new task's webhook and books the task states
	// read (nil: no push workload).
	push *pushRun
}

// dialRemote reads the agent card at each of cfg.Target's URLs and builds
// a client for cfg.Transport.
func dialRemote(ctx context.Context, cfg *Config) (*remoteTarget, error) {
	transport := cfg.Transport
	proto := map[string]a2a.TransportProtocol{
		"jsonrpc": a2a.TransportProtocolJSONRPC,
		"http":    a2a.TransportProtocolHTTPJSON,
		"grpc":    a2a.TransportProtocolGRPC,
	}[transport]
	r := &remoteTarget{header: cfg.CallerHeader, ids: newCallers(cfg)}
	hc := keepAliveClient(cfg.Concurrency)
	for _, base := range cfg.Targets() {
		card, err := fetchCard(ctx, strings.TrimRight(base, "/"))
		if err == nil {
			var c *a2aclient.Client
			c, err = a2aclient.NewFromCard(ctx, card,
				a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{proto}}),
				a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc),
				a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
			if err != nil {
				err = fmt.Errorf("client for %s over %s: %w", base, transport, err)
			}
			r.cs = append(r.cs, c)
		}
		if err != nil {
			_ = r.close()
			return nil, err
		}
	}
	return r, nil
}

// keepAliveClient is the HTTP client of the JSON-RPC and HTTP+JSON
// transports: it keeps an idle connection per worker to each server (Go's
// default keeps 2 per host, so with more workers most calls would open a
// new TCP connection and their latency would include it).
func keepAliveClient(workers int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0 // no limit across hosts
	t.MaxIdleConnsPerHost = max(workers, 2) + 8
	return &http.Client{Transport: t, Timeout: 3 * time.Minute}
}

// c returns the client of the next call.
func (r *remoteTarget) c() *a2aclient.Client {
	return r.cs[(r.turn.Add(1)-1)%uint64(len(r.cs))]
}

// as returns ctx carrying the identity that owns contextID.
func (r *remoteTarget) as(ctx context.Context, contextID string) context.Context {
	return r.with(ctx, r.ids.forContext(contextID))
}

// asOwner returns ctx carrying the identity that created task id.
func (r *remoteTarget) asOwner(ctx context.Context, id a2a.TaskID) context.Context {
	return r.with(ctx, r.ids.ofTask(id))
}

func (r *remoteTarget) with(ctx context.Context, caller string) context.Context {
	if caller == "" {
		return ctx
	}
	return a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{r.header: {caller}})
}

func fetchCard(ctx context.Context, base string) (*a2a.AgentCard, error) {
	u := base + a2asrv.WellKnownAgentCardPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent card: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("agent card: GET %s: %s", u, resp.Status)
	}
	var card a2a.AgentCard
	if err := decodeJSON(resp.Body, &card); err != nil {
		return nil, fmt.Errorf("agent card: %w", err)
	}
	return &card, nil
}

func (r *remoteTarget) close() error {
	var errs []error
	for _, c := range r.cs {
		errs = append(errs, c.Destroy())
	}
	return errors.Join(errs...)
}

// create sends one user message in the task's context; the server's
// synthetic agent turns it into a task (created, updated, completed).
func (r *remoteTarget) create(ctx context.Context, task *a2a.Task) (a2a.TaskID, error) {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("loadgen"))
	msg.ContextID = task.ContextID
	caller := r.ids.forContext(task.ContextID)
	res, err := r.c().SendMessage(r.with(ctx, caller), &a2a.SendMessageRequest{Message: msg, Config: r.push.sendConfig()})
	if err != nil {
		return "", err
	}
	t, ok := res.(*a2a.Task)
	if !ok {
		return "", fmt.Errorf("SendMessage returned %T, want a task: %w", res, errTransport)
	}
	r.ids.created(t.ID, caller)
	r.push.saw(t)
	return t.ID, nil
}

func (r *remoteTarget) get(ctx context.Context, id a2a.TaskID) error {
	zero := 0
	t, err := r.c().GetTask(r.asOwner(ctx, id), &a2a.GetTaskRequest{ID: id, HistoryLength: &zero})
	r.push.saw(t)
	return err
}

func (r *remoteTarget) cancel(ctx context.Context, id a2a.TaskID) error {
	t, err := r.c().CancelTask(r.asOwner(ctx, id), &a2a.CancelTaskRequest{ID: id})
	r.push.saw(t)
	return err
}

var errUnsupported = errors.New("operation not supported by a remote target")

func (r *remoteTarget) replace(context.Context, *a2a.Task) error { return errUnsupported }
func (r *remoteTarget) appendHistory(context.Context, a2a.TaskID, *a2a.Message) error {
	return errUnsupported
}
func (r *remoteTarget) delete(context.Context, a2a.TaskID) error { return errUnsupported }

func (r *remoteTarget) list(ctx context.Context, contextID, token string, pageSize int, _ bool) (page, error) {
	zero := 0
	resp, err := r.c().ListTasks(r.as(ctx, contextID), &a2a.ListTasksRequest{
		ContextID: contextID, PageSize: pageSize, PageToken: token, HistoryLength: &zero,
	})
	if err != nil {
		return page{}, err
	}
	p := page{next: resp.NextPageToken, total: resp.TotalSize}
	for _, task := range resp.Tasks {
		p.ids = append(p.ids, task.ID)
	}
	return p, nil
}

func (r *remoteTarget) supports(op Op) bool { return remoteOps[op] }

func (r *remoteTarget) assignsIDs() bool { return true }
