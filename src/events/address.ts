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
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 3]
] as const) {
  blocked.addSubnet(net, prefix, "ipv4")
}
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  // discard-only, local-use NAT64 (a network's own translator), Teredo, documentation
  ["100::", 64],
  ["64:ff9b:1::", 48],
  ["2001::", 32],
  ["2001:db8::", 32],
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10],
  ["ff00::", 8]
] as const) {
  blocked.addSubnet(net, prefix, "ipv6")
}

/** An IPv6 address as its eight 16-bit groups (an IPv4 tail as two), or undefined when it is not one. */
const groupsOf = (address: string): ReadonlyArray<number> | undefined => {
  if (isIP(address) !== 6) return undefined
  let text = address.toLowerCase().replace(/%.*$/, "")
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (v4 !== null) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number]
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head, tail] = text.split("::") as [string, string | undefined]
  const part = (s: string | undefined) =>
    s === undefined || s === "" ? [] : s.split(":").map((g) => Number.parseInt(g, 16))
  const left = part(head)
  const right = part(tail)
  const groups = tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill(0), ...right]
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined
}

const v4Of = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`

/**
 * The IPv4 address an IPv6 address carries, where the network would reach that IPv4 address for it: mapped
 * (`::ffff:a.b.c.d`), compatible (`::a.b.c.d`, deprecated), NAT64's well-known prefix (`64:ff9b::a.b.c.d`), 6to4
 * (`2002:AABB:CCDD::`).
 */
const embeddedV4 = (g: ReadonlyArray<number>): string | undefined => {
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0)
  if (zero(0, 5) && (g[5] === 0xffff || g[5] === 0)) return v4Of(g[6] ?? 0, g[7] ?? 0)
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return v4Of(g[6] ?? 0, g[7] ?? 0)
  if (g[0] === 0x2002) return v4Of(g[1] ?? 0, g[2] ?? 0)
  return undefined
}

export const isPrivateAddress = (address: string): boolean => {
  const family = isIP(address)
  if (family === 4) return blocked.check(address, "ipv4")
  if (family !== 6) return false
  const groups = groupsOf(address)
  if (groups === undefined) return true
  const v4 = embeddedV4(groups)
  if (v4 !== undefined && blocked.check(v4, "ipv4")) return true
  return blocked.check(address.replace(/%.*$/, ""), "ipv6")
}

/** The URL's host without IPv6 brackets and without the trailing dots of a fully qualified name (`localhost.`). */
const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, "$1").replace(/\.+$/, "")

/** True when the URL's host is written as a private address or as localhost (no DNS). */
export const namesPrivateHost = (url: URL): boolean => {
  const host = hostOf(url).toLowerCase()
  return host === "" || host === "localhost" || host.endsWith(".localhost") || isPrivateAddress(host)
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
