// Where webhooks may connect: Forgejo's [webhook] ALLOWED_HOST_LIST
// (modules/hostmatcher), as GANTRY_WEBHOOK_ALLOWED_HOSTS. Entries are comma
// separated and OR-ed:
//   external  global unicast addresses only (the default)
//   private   RFC 1918 and fc00::/7
//   loopback  127.0.0.0/8 and ::1
//   *         everything
//   CIDR      e.g. 1.2.3.0/24, 2001:db8::/32
//   glob      matched on the URL's host name (a name match allows whatever it resolves to)
//
// The check runs on the RESOLVED address, inside the connection's DNS lookup
// (and on IP literals before connecting), on every connection: a name that
// resolves to an allowed address for a check and to 127.0.0.1 for the connect
// (DNS rebinding) cannot slip through, because there is only one resolution.
//
// Departure from Forgejo ≤1.26 (GHSA-2fcr-jfvc-vgg2): `external` also refuses
// CGNAT, NAT64, 6to4, Teredo, IPv4-compatible, documentation and benchmarking
// ranges, and link-local (cloud metadata).
import dns from 'node:dns';
import net from 'node:net';
import type { Agent, buildConnector } from 'undici';

interface AllowList {
  all: boolean;
  external: boolean;
  private: boolean;
  loopback: boolean;
  networks: net.BlockList;
  hostGlobs: RegExp[];
  source: string;
}

function blockList(v4: string[], v6: string[]): net.BlockList {
  const list = new net.BlockList();
  for (const cidr of v4) {
    const [address, prefix] = cidr.split('/');
    list.addSubnet(address ?? '', Number(prefix), 'ipv4');
  }
  for (const cidr of v6) {
    const [address, prefix] = cidr.split('/');
    list.addSubnet(address ?? '', Number(prefix), 'ipv6');
  }
  return list;
}

const NOT_EXTERNAL = blockList(
  [
    '0.0.0.0/8',
    '10.0.0.0/8',
    '100.64.0.0/10',
    '127.0.0.0/8',
    '169.254.0.0/16',
    '172.16.0.0/12',
    '192.0.0.0/24',
    '192.0.2.0/24',
    '192.88.99.0/24',
    '192.168.0.0/16',
    '198.18.0.0/15',
    '198.51.100.0/24',
    '203.0.113.0/24',
    '224.0.0.0/4',
    '240.0.0.0/4',
  ],
  [
    '::/96',
    '64:ff9b::/96',
    '64:ff9b:1::/48',
    '100::/64',
    '2001::/32',
    '2001:2::/48',
    '2001:10::/28',
    '2001:20::/28',
    '2001:db8::/32',
    '2002::/16',
    '3fff::/20',
    'fc00::/7',
    'fe80::/10',
    'ff00::/8',
  ],
);
const GLOBAL_UNICAST_V6 = blockList([], ['2000::/3']);
const PRIVATE = blockList(['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'], ['fc00::/7']);
const LOOPBACK = blockList(['127.0.0.0/8'], ['::1/128']);

function globToRegExp(glob: string): RegExp {
  let out = '';
  for (const ch of glob) {
    if (ch === '*') out += '.*';
    else if (ch === '?') out += '.';
    else out += ch.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${out}$`, 'i');
}

export function parseAllowedHosts(setting: string): AllowList {
  const list: AllowList = {
    all: false,
    external: false,
    private: false,
    loopback: false,
    networks: new net.BlockList(),
    hostGlobs: [],
    source: setting,
  };
  for (const raw of setting.split(',')) {
    const entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry === '*') list.all = true;
    else if (entry === 'external') list.external = true;
    else if (entry === 'private') list.private = true;
    else if (entry === 'loopback') list.loopback = true;
    else if (entry.includes('/') && net.isIP(entry.split('/')[0] ?? '') !== 0) {
      const [address = '', prefix] = entry.split('/');
      list.networks.addSubnet(address, Number(prefix), net.isIPv6(address) ? 'ipv6' : 'ipv4');
    } else list.hostGlobs.push(globToRegExp(entry));
  }
  return list;
}

/** `::ffff:10.0.0.1` is 10.0.0.1 to the kernel: judge it as such. */
function normalise(address: string): { address: string; family: 'ipv4' | 'ipv6' } {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1]) return { address: mapped[1], family: 'ipv4' };
  return { address, family: net.isIPv6(address) ? 'ipv6' : 'ipv4' };
}

export function isAddressAllowed(list: AllowList, rawAddress: string): boolean {
  if (list.all) return true;
  const { address, family } = normalise(rawAddress);
  if (list.networks.check(address, family)) return true;
  if (list.loopback && LOOPBACK.check(address, family)) return true;
  if (list.private && PRIVATE.check(address, family)) return true;
  if (list.external) {
    const global = family === 'ipv4' || GLOBAL_UNICAST_V6.check(address, family);
    if (global && !NOT_EXTERNAL.check(address, family)) return true;
  }
  return false;
}

export function isHostNameAllowed(list: AllowList, hostname: string): boolean {
  return list.all || list.hostGlobs.some((glob) => glob.test(hostname));
}

export const REFUSED_TARGET_CODE = 'GANTRY_WEBHOOK_REFUSED';

/**
 * A target the allow list refuses. The message names the host of the hook's
 * URL only: Forgejo adds the resolved address (`deny 'host(10.0.0.5)'`), but
 * the delivery history is shown to organization owners, and the addresses an
 * internal name resolves to are the very map of the inside an SSRF probe is
 * after. Retrying cannot help until the hook or the setting changes, so the
 * worker records it as a permanent failure.
 */
export class RefusedTargetError extends Error {
  readonly code = REFUSED_TARGET_CODE;
  constructor(host: string) {
    super(
      `webhook can only call allowed HTTP servers (check GANTRY_WEBHOOK_ALLOWED_HOSTS, Forgejo's webhook.ALLOWED_HOST_LIST), deny '${host}'`,
    );
  }
}

/** Whether `error` (or an error it wraps) is a refusal by the allow list. */
export function isRefusedTarget(error: unknown): boolean {
  for (
    let e: unknown = error, depth = 0;
    e instanceof Error && depth < 5;
    e = (e as { cause?: unknown }).cause, depth += 1
  ) {
    if ((e as { code?: unknown }).code === REFUSED_TARGET_CODE) return true;
  }
  return false;
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | dns.LookupAddress[],
  family?: number,
) => void;

/**
 * An undici dispatcher whose every connection is checked against the allow
 * list after DNS resolution. Redirects are not followed (undici's default).
 * undici is loaded here, on the first delivery, not as the server starts: it
 * is about 4.6 MB of heap that a process sending no webhooks never needs.
 */
export async function createGuardedAgent(setting: string, options: { connectTimeoutMs?: number } = {}): Promise<Agent> {
  const list = parseAllowedHosts(setting);
  const { Agent, buildConnector } = await import('undici');
  const lookup = (hostname: string, opts: dns.LookupOptions, callback: LookupCallback): void => {
    dns.lookup(hostname, { ...opts, all: true }, (error, addresses) => {
      if (error) return callback(error, '');
      const byName = isHostNameAllowed(list, hostname);
      const allowed = byName ? addresses : addresses.filter((a) => isAddressAllowed(list, a.address));
      if (allowed.length === 0) return callback(new RefusedTargetError(hostname), '');
      if (opts.all) return callback(null, allowed);
      const first = allowed[0] as dns.LookupAddress;
      callback(null, first.address, first.family);
    });
  };
  const base = buildConnector({ timeout: options.connectTimeoutMs ?? 5000, lookup } as buildConnector.BuildOptions);
  const connect: buildConnector.connector = (opts, callback) => {
    // An IP literal skips DNS (and our lookup): judge it here.
    const host = opts.hostname.replace(/^\[|\]$/g, '');
    if (net.isIP(host) !== 0 && !isHostNameAllowed(list, host) && !isAddressAllowed(list, host)) {
      callback(new RefusedTargetError(host), null);
      return;
    }
    base(opts, callback);
  };
  return new Agent({ connect });
}
