package a2aserver

import (
	"context"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
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
// its push.ConfigStore and returns every configuration at once. Install it
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
	configs, next, err := p.l.ListPage(ctx, r.TaskID, r.PageSize, r.PageToken)
	if err != nil {
		return ctx, nil, err
	}
	return ctx, &a2a.ListTaskPushConfigResponse{Configs: configs, NextPageToken: next}, nil
}
