import { Context, type Option } from "effect"

/** Where traces go (provided by the composition root from src/config.ts). */
export interface TracingEnvShape {
  /** OTLP/HTTP base URL of a trace collector (OTEL_EXPORTER_OTLP_ENDPOINT); none: no spans are made. */
  readonly otlpEndpoint: Option.Option<string>
  /** The traces' `service.name` (OTEL_SERVICE_NAME). */
  readonly otelServiceName: string
}

export class TracingEnv extends Context.Tag("greenline/TracingEnv")<TracingEnv, TracingEnvShape>() {}
