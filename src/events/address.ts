import { lookup } from "node:dns/promises"
import { BlockList, isIP } from "node:net"

/**
 * Webhook receivers must be public addresses (unless WEBHOOK_ALLOW_PRIVATE=true): a URL that names or resolves to
 * a loopback, private, link-local or otherwise internal address is refused, so an API token cannot make the server
 * call its own network. Checked at creation (literal addresses) and before every attempt (names, after DNS).
 */
const blocked = new BlockList()
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 3]
] as const) {
  blocked.addSubnet(net, prefix, "ipv4")
}
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8]
] as const) {
  blocked.addSubnet(net, prefix, "ipv6")
}

const mappedV4 = (address: string) => /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1]

export const isPrivateAddress = (address: string): boolean => {
  const v4 = mappedV4(address)
  if (v4 !== undefined) return blocked.check(v4, "ipv4")
  const family = isIP(address)
  if (family === 4) return blocked.check(address, "ipv4")
  if (family === 6) return blocked.check(address, "ipv6")
  return false
}

const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, "$1")

/** True when the URL's host is written as a private address or as localhost (no DNS). */
export const namesPrivateHost = (url: URL): boolean => {
  const host = hostOf(url).toLowerCase()
  return host === "localhost" || host.endsWith(".localhost") || isPrivateAddress(host)
}

/** Undefined when the URL may be called; otherwise why not. Resolves the host's name. */
export const refusedAddress = async (url: URL): Promise<string | undefined> => {
  if (namesPrivateHost(url)) return `${url.hostname} is a private or loopback address`
  const host = hostOf(url)
  if (isIP(host) !== 0) return undefined
  const addresses = await lookup(host, { all: true }).catch(() => [])
  if (addresses.length === 0) return `${host} does not resolve`
  const bad = addresses.find((a) => isPrivateAddress(a.address))
  return bad === undefined ? undefined : `${host} resolves to the private address ${bad.address}`
}
