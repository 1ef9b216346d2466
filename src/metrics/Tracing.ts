import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import * as Resource from "@effect/opentelemetry/Resource"
import * as OtelTracer from "@effect/opentelemetry/Tracer"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, Option, Tracer } from "effect"
import { AppConfig } from "../config.ts"

/**
 * Tracing (contract.md §5): with OTEL_EXPORTER_OTLP_ENDPOINT set, spans go to that collector over OTLP/HTTP (JSON),
 * through `@effect/opentelemetry` and the OpenTelemetry SDK's batch processor; every request gets a server span and
 * the spans the Effect code makes (the SQL client's `sql.execute` and `sql.transaction`) nest under it. Without it,
 * Effect's tracer is switched off, so no span is made at all (not even the SQL client's, which it would otherwise
 * make and drop).
 */

/**
 * Effect's tracer over the OpenTelemetry SDK, like `@effect/opentelemetry`'s, without its context hook: that one also
 * makes each span the active span of OpenTelemetry's own context API around every step of a fiber, which only
 * OpenTelemetry instrumentations of other libraries would read (there are none here). Measured on a request of four
 * spans with asynchronous steps: 170 µs of CPU with the hook, 91 µs without, 57 µs with tracing off (docs/benchmarks.md).
 */
const tracerWithoutOtelContext = Layer.unwrapEffect(
  Effect.map(OtelTracer.make, (otel) =>
    Layer.setTracer(Tracer.make({ span: otel.span, context: (execution) => execution() }))
  )
)

/** The OTLP/HTTP traces URL for a base endpoint (the specification's rule: the base plus `/v1/traces`). */
export const tracesUrl = (endpoint: string) => `${endpoint.replace(/\/+$/, "")}/v1/traces`

export const TracingLive: Layer.Layer<never, never, AppConfig> = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    Option.match(config.otlpEndpoint, {
      onNone: () => Layer.setTracerEnabled(false),
      onSome: (endpoint) =>
        tracerWithoutOtelContext.pipe(
          Layer.provide(OtelTracer.layerTracer),
          Layer.provide(
            // headers (OTEL_EXPORTER_OTLP_HEADERS) and timeouts come from the exporter's own environment variables;
            // the batch processor's limits and the sampler from OTEL_BSP_* and OTEL_TRACES_SAMPLER*
            NodeSdk.layerTracerProvider(new BatchSpanProcessor(new OTLPTraceExporter({ url: tracesUrl(endpoint) })))
          ),
          Layer.provide(
            // OTEL_RESOURCE_ATTRIBUTES, with the service name of the configuration
            Resource.layerFromEnv(Resource.configToAttributes({ serviceName: config.otelServiceName }))
          )
        )
    })
  )
)
