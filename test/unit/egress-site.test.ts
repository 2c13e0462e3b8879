/** The operator's egress site settings: parsing (each mistake named) and matching (domain/egress-site.ts, sandbox/egress-route.ts). */
import { internalMatcher, noProxyMatcher, parseInternalHosts, parseNoProxy, parseUpstreamProxy } from '../../src/domain/egress-site';
import { forbiddenRange } from '../../src/sandbox/egress-address';
import { SiteRules } from '../../src/sandbox/egress-route';

test('upstream proxy URLs: credentials decoded into one Basic value, mistakes named without echoing them', () => {
  expect(parseUpstreamProxy('http://us%40er:p%3Ass@gw.example:3128')).toEqual({ host: 'gw.example', port: 3128, authorization: `Basic ${Buffer.from('us@er:p:ss').toString('base64')}` });
  expect(parseUpstreamProxy('http://10.0.0.5:8080')).toEqual({ host: '10.0.0.5', port: 8080, authorization: null });
  expect(parseUpstreamProxy('http://[fd00::5]:8080')).toMatchObject({ host: 'fd00::5', port: 8080 });
  for (const [bad, why] of [
    ['https://u:topsecret@gw:443', /http:\/\/ URL/], ['http://u:topsecret@gw', /port/], ['http://gw:3128/path', /without a path/],
    ['socks5://gw:1080', /http:\/\//], ['gw:3128', /http:\/\/ URL|not a URL/],
  ] as const) {
    const r = parseUpstreamProxy(bad);
    expect(r).toMatch(why);
    expect(String(r)).not.toContain('topsecret');
  }
});

test('NO_PROXY: names cover their subdomains, ports narrow, CIDRs match resolved addresses, * is everything', () => {
  const rules = parseNoProxy('.corp.example, direct.example:8080 10.0.0.0/8,fd00::/8');
  expect(typeof rules).not.toBe('string');
  const m = noProxyMatcher(rules as Exclude<typeof rules, string>);
  expect(m('a.corp.example', 443, [])).toBe(true);
  expect(m('corp.example', 443, [])).toBe(true);
  expect(m('evilcorp.example', 443, [])).toBe(false);
  expect(m('direct.example', 8080, [])).toBe(true);
  expect(m('direct.example', 443, [])).toBe(false);
  expect(m('x.example', 443, ['10.2.3.4'])).toBe(true);
  expect(m('x.example', 443, ['11.2.3.4'])).toBe(false);
  expect(m('x.example', 443, ['fd00::1'])).toBe(true);
  expect(noProxyMatcher(parseNoProxy('*') as never)('any.example', 1, [])).toBe(true);
  expect(parseNoProxy('10.0.0.0/40')).toMatch(/prefix length/);
  expect(parseNoProxy('a b/c')).toMatch(/not a host name/);
});

test('internal hosts: exact names into their own ranges; wide ranges, IP names and bad ranges refused', () => {
  const hosts = parseInternalHosts('registry.corp=10.1.2.0/24, mirror.corp.example=10.9.9.9 # the mirror\nregistry.corp=10.1.3.0/24\n');
  expect(hosts).toEqual([{ name: 'registry.corp', ranges: ['10.1.2.0/24', '10.1.3.0/24'] }, { name: 'mirror.corp.example', ranges: ['10.9.9.9/32'] }]);
  const m = internalMatcher(hosts as Exclude<typeof hosts, string>);
  expect(m.rangeFor('registry.corp', '10.1.3.7')).toBe('10.1.3.0/24');
  expect(m.rangeFor('registry.corp', '10.1.4.7')).toBeNull();
  expect(m.rangeFor('x.registry.corp', '10.1.2.7')).toBeNull(); // exact names only
  expect(m.rangeFor('mirror.corp.example', '10.9.9.10')).toBeNull();
  for (const [bad, why] of [
    ['everything.example=0.0.0.0/0', /wider than \/8/], ['10.0.0.1=10.0.0.1', /IP address/], ['mirror=10.0.0.1', /single-label/],
    ['localhost.localhost=127.0.0.1', /this machine/], ['a.example', /expected name=/], ['a.example=10.0.0.300', /not an address/], ['v6.example=fd00::/8', /wider than \/32/],
  ] as const) expect(parseInternalHosts(bad)).toMatch(why);
});

test('site rules: another name resolving into an internal range is refused with the operator\'s remedy; the internal name outside its ranges too', () => {
  const site = new SiteRules({ upstream: { host: '10.0.0.5', port: 3128, authorization: 'Basic x' }, noProxy: parseNoProxy('.corp.example') as never, internal: [{ name: 'mirror.corp.example', ranges: ['10.9.9.0/24'] }] }, forbiddenRange);
  expect(site.addressProblem('mirror.corp.example', '10.9.9.9')).toBeNull();
  expect(site.addressProblem('mirror.corp.example', '10.9.8.9')).toMatch(/outside the ranges the operator allows for it \(CORRAL_EGRESS_INTERNAL_HOSTS: 10\.9\.9\.0\/24\)/);
  expect(site.addressProblem('evil.example', '10.9.9.9')).toBe('the proxy refused evil.example: it resolves to 10.9.9.9, a private-use address (10.0.0.0/8); an operator can allow it with CORRAL_EGRESS_INTERNAL_HOSTS=evil.example=10.9.9.9 (a run\'s allowlist cannot)');
  expect(site.addressProblem('evil.example', '169.254.169.254')).toMatch(/a link-local \(cloud metadata\) address/);
  expect(site.addressProblem('public.example', '93.184.216.34')).toBeNull();
  expect(site.route('mirror.corp.example', 443, ['10.9.9.9'])).toBe('direct');
  expect(site.route('registry.example', 443, [])).toBe('upstream');
  expect(site.upstreamShown()).toBe('10.0.0.5:3128');
});
