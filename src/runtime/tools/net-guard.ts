/**
 * Address policy for outbound fetches: which IP addresses a tool may connect to. Contract: `blockedReason`
 * returns null only for a public unicast address. Refused: IPv4 this-network, loopback, private (RFC 1918),
 * CGNAT (100.64/10), link-local (169.254/16, cloud metadata), IETF protocol assignments (192.0.0/24),
 * documentation (192.0.2/24, 198.51.100/24, 203.0.113/24), 6to4 relay anycast, benchmarking (198.18/15),
 * multicast, reserved (240/4) and broadcast; IPv6 outside global unicast 2000::/3, and inside it the
 * documentation (2001:db8::/32, 3fff::/20), IETF protocol (2001::/23, incl. Teredo 2001::/32 and ORCHID),
 * SRv6 (5f00::/16) blocks; IPv6 forms embedding an IPv4 address (v4-mapped ::ffff:0:0/96, v4-compatible ::/96,
 * NAT64 64:ff9b::/96, 6to4 2002::/16) are judged by the embedded address, local-use NAT64 64:ff9b:1::/48 is refused.
 */
import { isIP } from "node:net";

function v4Bytes(ip: string): number[] | null {
  const parts = ip.split(".");
  if (parts.length !== 4) return null;
  const out: number[] = [];
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return null;
    const n = Number(p);
    if (n > 255) return null;
    out.push(n);
  }
  return out;
}

function v4Reason(b: number[]): string | null {
  const [a = 0, c = 0, d = 0] = b;
  const e = b[3] ?? 0;
  if (a === 0) return "this-network";
  if (a === 10) return "private";
  if (a === 100 && c >= 64 && c <= 127) return "shared (CGNAT)";
  if (a === 127) return "loopback";
  if (a === 169 && c === 254) return "link-local";
  if (a === 172 && c >= 16 && c <= 31) return "private";
  if (a === 192 && c === 0 && d === 0) return "IETF protocol assignment";
  if (a === 192 && c === 0 && d === 2) return "documentation";
  if (a === 192 && c === 88 && d === 99) return "6to4 relay";
  if (a === 192 && c === 168) return "private";
  if (a === 198 && (c === 18 || c === 19)) return "benchmarking";
  if (a === 198 && c === 51 && d === 100) return "documentation";
  if (a === 203 && c === 0 && d === 113) return "documentation";
  if (a >= 224 && a <= 239) return "multicast";
  if (a >= 240) return a === 255 && c === 255 && d === 255 && e === 255 ? "broadcast" : "reserved";
  return null;
}

/** Eight 16-bit groups of an IPv6 address (zone index removed), or null. */
export function v6Groups(ip: string): number[] | null {
  let s = ip.replace(/%.*$/, "").toLowerCase();
  if (s.includes(".")) {
    // A trailing dotted quad becomes its two 16-bit groups.
    const at = s.lastIndexOf(":");
    const b = v4Bytes(s.slice(at + 1));
    if (b === null) return null;
    const hex = (x: number, y: number): string => ((x << 8) | y).toString(16);
    s = `${s.slice(0, at + 1)}${hex(b[0] ?? 0, b[1] ?? 0)}:${hex(b[2] ?? 0, b[3] ?? 0)}`;
  }
  const halves = s.split("::");
  if (halves.length > 2) return null;
  const parse = (h: string): number[] | null => {
    if (h === "") return [];
    const out: number[] = [];
    for (const g of h.split(":")) {
      if (!/^[0-9a-f]{1,4}$/.test(g)) return null;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  const head = parse(halves[0] ?? "");
  const rest = halves.length === 2 ? parse(halves[1] ?? "") : [];
  if (head === null || rest === null) return null;
  if (halves.length === 1) return head.length === 8 ? head : null;
  const fill = 8 - head.length - rest.length;
  if (fill < 1) return null;
  return [...head, ...new Array<number>(fill).fill(0), ...rest];
}

function v6Reason(g: number[]): string | null {
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = g;
  const embedded = (): string | null => v4Reason([g6 >> 8, g6 & 255, g7 >> 8, g7 & 255]);
  const zeroTo = (n: number): boolean => g.slice(0, n).every((x) => x === 0);
  if (zeroTo(5) && g5 === 0xffff) return embedded(); // v4-mapped
  if (zeroTo(6)) return g6 === 0 && g7 <= 1 ? (g7 === 1 ? "loopback" : "unspecified") : embedded(); // v4-compatible
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return embedded(); // NAT64
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 1) return "local-use NAT64";
  if (g0 === 0x2002) return v4Reason([g1 >> 8, g1 & 255, g2 >> 8, g2 & 255]); // 6to4
  if ((g0 & 0xe000) !== 0x2000) {
    if ((g0 & 0xfe00) === 0xfc00) return "unique local";
    if ((g0 & 0xffc0) === 0xfe80) return "link-local";
    if ((g0 & 0xff00) === 0xff00) return "multicast";
    return "reserved";
  }
  if (g0 === 0x2001 && g1 < 0x0200) return g1 === 0 ? "Teredo" : "IETF protocol assignment";
  if (g0 === 0x2001 && g1 === 0x0db8) return "documentation";
  if ((g0 & 0xfff0) === 0x3ff0) return "documentation";
  if (g0 === 0x5f00) return "SRv6";
  return null;
}

/** Why `ip` must not be contacted, or null for a public unicast address. Unparseable input is refused. */
export function blockedReason(ip: string): string | null {
  const kind = isIP(ip.replace(/%.*$/, ""));
  if (kind === 4) {
    const b = v4Bytes(ip);
    return b === null ? "not an address" : v4Reason(b);
  }
  if (kind === 6) {
    const g = v6Groups(ip);
    return g === null ? "not an address" : v6Reason(g);
  }
  return "not an address";
}
