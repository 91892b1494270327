// Package outboxtest is the conformance suite of pushdelivery.Outbox: Run
// checks every rule of the contract against an implementation, one subtest
// named by its rule, driving the outbox's clock and moving task revisions
// through the engine.Store beside it (an outbox that implements
// pushdelivery.Toucher is touched after each write, as the worker does).
// Every outbox of pushdelivery runs it; a custom outbox can too.
package outboxtest
