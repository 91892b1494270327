package a2aserver

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/grpc"
)

// PushConfigLister lists a task's push-notification configurations by
// pages with an opaque token of its own (pushdelivery.ConfigStore).
type PushConfigLister interface {
	ListPage(ctx context.Context, task a2a.TaskID, pageSize int, token string) ([]*a2a.PushConfig, string, error)
}

// PushConfigPages returns a call interceptor that answers
// ListTaskPushConfigs by pages from l: pageSize and pageToken are honoured
// and nextPageToken set (the seed: push-config listing keeps its own page
// contract, independent of task listing). a2a-go v2.3.1 passes neither to
// its push.ConfigStore and returns every configuration at once; over
// HTTP+JSON its handler does not even read them from the query, so wrap
// that handler in RESTQueryCompat, which hands them over. Install it
// after TaskGuard, which answers not-found for a task the caller cannot
// see before the configurations are read.
func PushConfigPages(l PushConfigLister) a2asrv.CallInterceptor {
	return pushConfigPages{l: l}
}

type pushConfigPages struct {
	a2asrv.PassthroughCallInterceptor
	l PushConfigLister
}

// Before implements a2asrv.CallInterceptor.
func (p pushConfigPages) Before(ctx context.Context, _ *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	r, ok := req.Payload.(*a2a.ListTaskPushConfigRequest)
	if !ok || r == nil {
		return ctx, nil, nil
	}
	size, token, err := pageAsked(ctx, r)
	if err != nil {
		return ctx, nil, err
	}
	configs, next, err := p.l.ListPage(ctx, r.TaskID, size, token)
	if err != nil {
		return ctx, nil, err
	}
	if page, ok := ctx.Value(nextPageKey{}).(*nextPage); ok {
		page.token = next // for GRPCPushConfigPages
	}
	return ctx, &a2a.ListTaskPushConfigResponse{Configs: configs, NextPageToken: next}, nil
}

// pageAsked is the page size and token of r, or over HTTP+JSON, where
// a2a-go leaves them unset, of its query (RESTQueryCompat).
func pageAsked(ctx context.Context, r *a2a.ListTaskPushConfigRequest) (int, string, error) {
	q, ok := ctx.Value(restPushPageKey{}).(restPushPage)
	if !ok || r.PageSize != 0 || r.PageToken != "" || q.size == "" {
		return r.PageSize, cmp.Or(r.PageToken, q.token), nil
	}
	size, err := strconv.Atoi(q.size)
	if err != nil {
		return 0, "", fmt.Errorf("%w: pageSize is not an integer", a2a.ErrInvalidParams)
	}
	return size, q.token, nil
}

// GRPCPushConfigPages is a gRPC unary interceptor that carries
// PushConfigPages's nextPageToken to the ListTaskPushNotificationConfigs
// response: a2a-go v2.3.1's gRPC handler replaces the token of the
// handler's answer with "" (a2agrpc/v1 handler.go), so over gRPC a client
// could never reach a second page. Chain it with the other unary
// interceptors of a server that installs PushConfigPages.
func GRPCPushConfigPages(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if !strings.HasSuffix(info.FullMethod, "/ListTaskPushNotificationConfigs") {
		return next(ctx, req)
	}
	page := new(nextPage)
	resp, err := next(context.WithValue(ctx, nextPageKey{}, page), req)
	if r, ok := resp.(*a2apb.ListTaskPushNotificationConfigsResponse); ok && err == nil {
		r.NextPageToken = page.token
	}
	return resp, err
}

// nextPage is where PushConfigPages leaves the token for
// GRPCPushConfigPages, under nextPageKey in the call's context.
type nextPage struct{ token string }

type nextPageKey struct{}

// PushConfigCheck returns a call interceptor that checks the push config
// of a SendMessage or SendStreamingMessage with check
// (pushdelivery.ConfigStore.Check: its task is the message's, "" for a
// new task) before a2a-go saves it. Bad input, or a config the store
// would refuse, is then check's error and nothing runs (no task is
// created). A save that fails after the check passed must not leave the
// secrets in the config (pushdelivery.ConfigStore.Save blanks them):
// a2a-go v2.3.1 prints the whole config into that error, which the
// client and the logs get (SPEC N3).
func PushConfigCheck(check func(context.Context, a2a.TaskID, *a2a.PushConfig) error) a2asrv.CallInterceptor {
	return pushConfigCheck{check: check}
}

type pushConfigCheck struct {
	a2asrv.PassthroughCallInterceptor
	check func(context.Context, a2a.TaskID, *a2a.PushConfig) error
}

// Before implements a2asrv.CallInterceptor.
func (p pushConfigCheck) Before(ctx context.Context, _ *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	r, ok := req.Payload.(*a2a.SendMessageRequest)
	if !ok || r == nil || r.Config == nil || r.Config.PushConfig == nil {
		return ctx, nil, nil
	}
	var task a2a.TaskID
	if r.Message != nil {
		task = r.Message.TaskID
	}
	return ctx, nil, p.check(ctx, task, r.Config.PushConfig)
}
