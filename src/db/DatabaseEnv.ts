import { Context, type Option, type Redacted } from "effect"

/** The default of DATABASE_POOL_MAX. */
export const DEFAULT_POOL_MAX = 20

/** Which database to open (provided by the composition root from src/config.ts). */
export interface DatabaseEnvShape {
  /** PostgreSQL (DATABASE_URL); none: the embedded PGlite under dataDir. */
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  /**
   * PostgreSQL connections one instance opens at most (DATABASE_POOL_MAX). Instances on one database together must
   * stay below its `max_connections` (100 by default).
   */
  readonly databasePoolMax: number
  /** The embedded database's directory (DATA_DIR); `:memory:` keeps it in memory. */
  readonly dataDir: string
  /**
   * Not from the environment: a dumped data directory (PGlite's `dumpDataDir`) that an in-memory embedded database
   * starts from instead of an empty one (tests).
   */
  readonly embeddedSeed?: Blob
}

export class DatabaseEnv extends Context.Tag("greenline/DatabaseEnv")<DatabaseEnv, DatabaseEnvShape>() {}
