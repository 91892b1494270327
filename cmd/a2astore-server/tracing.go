package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracingConfig is -otel-traces (H2): where spans go. Off by default.
type tracingConfig struct {
	// Exporter is "" (from the OTEL_* environment: off unless an OTLP
	// endpoint is set), "none", "otlp-grpc" or "otlp-http".
	Exporter string
	// Provider, when set, receives the spans instead (tests).
	Provider trace.TracerProvider
}

func addTracingFlags(fs *flag.FlagSet, c *tracingConfig) {
	fs.StringVar(&c.Exporter, "otel-traces", "", "OpenTelemetry traces: none, otlp-grpc or otlp-http (endpoint, headers and sampling from the standard OTEL_* variables); empty = otlp when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, with OTEL_EXPORTER_OTLP_PROTOCOL's protocol, else none")
}

// tracerOf is s's tracer named name, nil when tracing is off: the
// packages given nil do no span work at all.
func (s *server) tracerOf(name string) trace.Tracer {
	if _, off := s.tracer.(noop.TracerProvider); off {
		return nil
	}
	return s.tracer.Tracer(name)
}

// exporterFromEnv chooses the exporter the OTEL_* variables ask for: none
// unless an OTLP endpoint is set and the SDK is not disabled; grpc or
// http/protobuf (the default) as the protocol variables say.
func exporterFromEnv(getenv func(string) string) string {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return "none"
	}
	if getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return "none"
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto == "grpc" {
		return "otlp-grpc"
	}
	return "otlp-http"
}

// tracerProvider returns the server's tracer provider and its shutdown
// (which flushes the spans still buffered). The SDK takes its sampler from
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (default: parent-based,
// always on) and its resource from OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES.
func (c tracingConfig) tracerProvider(ctx context.Context) (trace.TracerProvider, func(context.Context) error, error) {
	if c.Provider != nil {
		return c.Provider, func(context.Context) error { return nil }, nil
	}
	kind := c.Exporter
	if kind == "" {
		kind = exporterFromEnv(os.Getenv)
	}
	var exp *otlptrace.Exporter
	var err error
	switch kind {
	case "none":
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	case "otlp-grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "otlp-http":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, nil, fmt.Errorf("-otel-traces %q: want none, otlp-grpc or otlp-http", kind)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", "a2astore-server")))
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	if name := os.Getenv("OTEL_SERVICE_NAME"); name != "" { // the environment wins over the default name
		res, _ = resource.Merge(res, resource.NewSchemaless(attribute.String("service.name", name)))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}
