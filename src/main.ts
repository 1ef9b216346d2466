/**
 * The one entry point: `bun --max-http-header-size=65536 src/main.ts` is what `npm start` and the container run.
 * Without arguments (or with `serve`) it is the server (serve.ts); with any other arguments, the CLI (cli.ts), so
 * that `docker run <image> backup /data/backup.tar.gz` runs the CLI of the same image with the same flags.
 */
export {}

const args = process.argv.slice(2).filter((a, i) => !(a === "--" && i === 0))
if (args.length === 0 || (args.length === 1 && args[0] === "serve")) await import("./serve.ts")
else await import("./cli.ts")
