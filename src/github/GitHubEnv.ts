import { Context, type Option, type Redacted } from "effect"

/** The GitHub provider's settings, GITHUB_* (provided by the composition root from src/config.ts). */
export interface GitHubEnvShape {
  /** GitHub REST API base URL (GITHUB_API_URL; Enterprise: `https://<host>/api/v3`). */
  readonly githubApiUrl: string
  /** Host name of repositories served by the GitHub provider (GITHUB_HOST). */
  readonly githubHost: string
  /** GitHub App id (GITHUB_APP_ID); with githubAppPrivateKey it enables the GitHub provider. */
  readonly githubAppId: Option.Option<string>
  /** The App's private key: PEM text, or a path to a PEM file (GITHUB_APP_PRIVATE_KEY). */
  readonly githubAppPrivateKey: Option.Option<Redacted.Redacted<string>>
  /** A personal access token (GITHUB_TOKEN), the alternative to an App. */
  readonly githubToken: Option.Option<Redacted.Redacted<string>>
  /** Secret of the webhook signatures (GITHUB_WEBHOOK_SECRET). */
  readonly githubWebhookSecret: Option.Option<Redacted.Redacted<string>>
  /** How often the provider reconciles queued PRs, targets and CI statuses with GitHub, ms (GITHUB_RECONCILE_MS). */
  readonly githubReconcileMs: number
}

export class GitHubEnv extends Context.Tag("greenline/GitHubEnv")<GitHubEnv, GitHubEnvShape>() {}
