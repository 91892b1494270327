// Package pushdelivery delivers A2A push notifications durably: the
// push-notification configurations of tasks with the delivery state of
// each webhook (an Outbox on the store's backend), and workers that read
// each task's event log (engine.LogStore, SPEC K7) and POST its events to
// the task's webhooks, at least once, in log order per task and webhook,
// with retries and backoff up to a deadline.
package pushdelivery
