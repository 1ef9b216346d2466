import { Context, Effect, Exit, Option, Runtime } from "effect"

/** A request's trace span (only when tracing is on): the handler runs under it, `end` records route and status. */
export interface RequestSpan {
  readonly wrap: <A, E, Env>(effect: Effect.Effect<A, E, Env>) => Effect.Effect<A, E, Env>
  readonly end: (route: string | undefined, status: number) => void
}

export interface RequestTracer {
  /** `route` is the API route's path when the request matched one. */
  readonly start: (method: string, route: string | undefined) => RequestSpan
}

/**
 * The per-request server span, made with the runtime's tracer (the OpenTelemetry one when tracing is on). Build it
 * only when tracing is on: the router then makes no span work for a request.
 */
export const makeRequestTracer = <R>(runtime: Runtime.Runtime<R>): RequestTracer => {
  const run = Runtime.runSync(runtime)
  const tracer = run(Effect.tracer)
  const clock = run(Effect.clock)
  return {
    start: (method, route) => {
      const span = tracer.span(
        route === undefined ? method : `${method} ${route}`,
        Option.none(),
        Context.empty(),
        [],
        clock.unsafeCurrentTimeNanos(),
        "server"
      )
      span.attribute("http.request.method", method)
      return {
        wrap: (effect) => Effect.withParentSpan(effect, span),
        end: (route, status) => {
          if (route !== undefined) span.attribute("http.route", route)
          span.attribute("http.response.status_code", status)
          span.end(clock.unsafeCurrentTimeNanos(), status >= 500 ? Exit.fail(`HTTP ${status}`) : Exit.void)
        }
      }
    }
  }
}
