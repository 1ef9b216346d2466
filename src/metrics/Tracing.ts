import { Effect, Layer, Option } from "effect"
import { TracingEnv } from "./TracingEnv.ts"

/**
 * Tracing (contract.md §5): with OTEL_EXPORTER_OTLP_ENDPOINT set, spans go to that collector over OTLP/HTTP (JSON),
 * through `@effect/opentelemetry` and the OpenTelemetry SDK's batch processor (`otlpTracing.ts`); every request gets
 * a server span and the spans the Effect code makes (the SQL client's `sql.execute` and `sql.transaction`) nest under
 * it. Without it, Effect's tracer is switched off, so no span is made at all (not even the SQL client's, which it
 * would otherwise make and drop), and the SDK's modules are not loaded: a fifth of a process's start-up.
 */

/** The OTLP/HTTP traces URL for a base endpoint (the specification's rule: the base plus `/v1/traces`). */
export const tracesUrl = (endpoint: string) => `${endpoint.replace(/\/+$/, "")}/v1/traces`

export const TracingLive: Layer.Layer<never, never, TracingEnv> = Layer.unwrapEffect(
  Effect.flatMap(TracingEnv, (config) =>
    Option.match(config.otlpEndpoint, {
      onNone: () => Effect.succeed(Layer.setTracerEnabled(false)),
      onSome: (endpoint) =>
        Effect.promise(() => import("./otlpTracing.ts")).pipe(
          Effect.map(({ otlpTracing }) => otlpTracing(tracesUrl(endpoint), config.otelServiceName))
        )
    })
  )
)
