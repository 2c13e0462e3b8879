/**
 * REDIS_URL: both forms parsed onto what ioredis needs (RedisConnections.optionsFor), every kind of
 * mistake refused at start-up (loadConfig) with a message naming the part that is wrong, and no
 * password ever in a description or a redacted URL.
 */
import { loadConfig } from '../../src/config';
import { describeRedisTarget, parseRedisUrl, redactRedisUrl, redisUrlWithDb } from '../../src/domain/redis-url';
import { RedisConnections } from '../../src/queue/redis-connections';

describe('the one-Redis form', () => {
  test.each([
    ['redis://127.0.0.1:6379', { kind: 'standalone', node: { host: '127.0.0.1', port: 6379 }, db: 0 }],
    ['redis://redis', { node: { host: 'redis', port: 6379 }, db: 0 }],
    ['redis://redis:6380/3', { node: { host: 'redis', port: 6380 }, db: 3 }],
    ['redis://redis?db=2', { db: 2 }],
    ['redis://:s3cr%40t@redis:6379', { password: 's3cr@t' }],
    ['redis://corral:pw@redis', { username: 'corral', password: 'pw' }],
    ['redis://corral@redis', { username: 'corral' }],
    ['redis://[::1]:6379', { node: { host: '::1', port: 6379 } }],
    ['rediss://redis:6380', { tls: {} }],
    ['rediss://redis?tlsCaFile=/etc/ca.pem&tlsServername=redis.internal', { tls: { caFile: '/etc/ca.pem', servername: 'redis.internal' } }],
    ['redis://redis?tls=true', { tls: {} }],
  ])('%s', (url, want) => {
    expect(parseRedisUrl(url)).toMatchObject(want);
  });
});

describe('the Sentinel form', () => {
  test('hosts, master name, db, credentials and TLS map onto ioredis\' sentinel options', () => {
    const url = 'rediss+sentinel://app:p%3Ass@10.0.0.1:26379,10.0.0.2,[fd00::3]:26380/corral-main?db=4&sentinelUsername=watch&sentinelPassword=sp&tlsCaFile=/ca.pem';
    const t = parseRedisUrl(url);
    expect(t).toEqual({
      kind: 'sentinel',
      sentinels: [{ host: '10.0.0.1', port: 26379 }, { host: '10.0.0.2', port: 26379 }, { host: 'fd00::3', port: 26380 }],
      masterName: 'corral-main', db: 4, username: 'app', password: 'p:ss',
      sentinelUsername: 'watch', sentinelPassword: 'sp', tls: { caFile: '/ca.pem' }, sentinelTls: { caFile: '/ca.pem' },
    });
    const conns = new RedisConnections(url, { readFile: (p) => Buffer.from(`CA of ${p}`) });
    const o = conns.optionsFor('commands', 'worker');
    expect(o).toMatchObject({
      sentinels: t.kind === 'sentinel' ? t.sentinels : [], name: 'corral-main', db: 4, username: 'app', password: 'p:ss',
      sentinelUsername: 'watch', sentinelPassword: 'sp', enableTLSForSentinelMode: true,
      tls: { ca: Buffer.from('CA of /ca.pem') }, sentinelTLS: { ca: Buffer.from('CA of /ca.pem') },
      maxRetriesPerRequest: null, connectionName: 'corral:worker',
    });
    expect(o).not.toHaveProperty('host');
    // Failovers are followed by the factory's SentinelWatch, not ioredis' detector (it can end a connection mid-failover).
    expect(o).not.toHaveProperty('failoverDetector');
    expect(conns.watch).toBeDefined();
    expect(new RedisConnections('redis://127.0.0.1:6379').watch).toBeUndefined();
    // A demoted primary's READONLY reconnects and sends the command again; nothing else does.
    expect(o.reconnectOnError?.(new Error('READONLY You can\'t write against a read only replica.'))).toBe(2);
    expect(o.reconnectOnError?.(new Error('ERR wrong number of arguments'))).toBe(false);
    // The API's connections fail fast and bound each command; blocking readers bound each call past its own timeout.
    expect(conns.optionsFor('api', 'api')).toMatchObject({ maxRetriesPerRequest: 1, enableOfflineQueue: false, commandTimeout: 5000 });
    expect(conns.optionsFor('blocking', 'sse')).toMatchObject({ maxRetriesPerRequest: null, blockingTimeoutGrace: 2000 });
    expect(conns.optionsFor('blocking', 'sse')).not.toHaveProperty('commandTimeout');
    expect(conns.description).toBe('Sentinel master "corral-main" via 10.0.0.1:26379,10.0.0.2:26379,fd00::3:26380 (db 4, TLS, with credentials, sentinels over TLS)');
    expect(conns.redactedUrl).not.toMatch(/p%3Ass|sp&|sentinelPassword=sp/);
  });

  test('the literal README form, defaults: no TLS, db 0, port 26379 where left out', () => {
    expect(parseRedisUrl('redis+sentinel://s1:26379,s2:26379,s3/mymaster')).toEqual({
      kind: 'sentinel', sentinels: [{ host: 's1', port: 26379 }, { host: 's2', port: 26379 }, { host: 's3', port: 26379 }], masterName: 'mymaster', db: 0,
    });
    expect(parseRedisUrl('redis+sentinel://s1/mymaster?sentinelTls=true')).toMatchObject({ sentinelTls: {} });
    expect(parseRedisUrl('redis+sentinel://s1/mymaster?sentinelTls=true')).not.toHaveProperty('tls');
  });

  test('redisUrlWithDb names another database in either form', () => {
    expect(redisUrlWithDb('redis://127.0.0.1:6379', 2)).toBe('redis://127.0.0.1:6379/2');
    expect(redisUrlWithDb('redis://:pw@h:1/5?tls=true', 3)).toBe('redis://:pw@h:1/3?tls=true');
    expect(redisUrlWithDb('redis+sentinel://a:1,b:2/m?db=1&sentinelPassword=x', 7)).toBe('redis+sentinel://a:1,b:2/m?sentinelPassword=x&db=7');
    expect(parseRedisUrl(redisUrlWithDb('redis+sentinel://a:1,b:2/m', 7))).toMatchObject({ db: 7, masterName: 'm' });
  });
});

describe('mistakes are refused at start-up, naming the part', () => {
  test.each([
    ['127.0.0.1:6379', /is not a URL of the form redis:\/\//],
    ['http://redis:6379', /the scheme "http:" is not one corral knows/],
    ['redis+cluster://a:1/x', /the scheme "redis\+cluster:"/],
    ['redis://redis:99999', /the host "redis:99999": the port "99999" is not a number from 1 to 65535/],
    ['redis://redis:abc', /the port "abc"/],
    ['redis://a:1,b:2', /names one Redis; for several sentinels use redis\+sentinel:\/\//],
    ['redis://redis/x', /the path \(the database number\) "x" is not a database number/],
    ['redis://redis/1?db=2', /the database is named twice/],
    ['redis://redis?sentinelPassword=x', /option sentinelPassword belongs to the Sentinel form/],
    ['redis://redis?family=6', /unknown option "family" \(known: db, tls, tlsCaFile, tlsServername\)/],
    ['redis://redis?tlsCaFile=/ca.pem', /option tlsCaFile needs TLS/],
    ['redis://redis?tls=maybe', /option tls=maybe: use true or false/],
    ['redis://redis#x', /a #fragment/],
    ['redis+sentinel://s1:26379,s2:26379', /the master name is missing: redis\+sentinel:\/\/s1:26379,s2:26379\/MASTER_NAME/],
    ['redis+sentinel://s1:26379,s2:26379/', /the master name is missing/],
    ['redis+sentinel:///mymaster', /no sentinel named/],
    ['redis+sentinel://s1:26379,,s2/mymaster', /sentinel 2 "" has no host/],
    ['redis+sentinel://s1:26379,s2:0/mymaster', /sentinel 2 "s2:0": the port "0"/],
    ['redis+sentinel://s1:26379,s1:26379/mymaster', /sentinel s1:26379 is named twice/],
    ['redis+sentinel://s1/my/master', /has no "\/"; the database goes in \?db=N/],
    ['redis+sentinel://s1/my%20master', /the master name "my master" may hold only letters/],
    ['redis+sentinel://s1/m?db=-1', /option db "-1" is not a database number/],
    ['redis+sentinel://s1/m?db=1&db=2', /option db is given twice/],
    ['redis+sentinel://s1/m?sentinelPassword=', /option sentinelPassword has no value/],
    ['redis+sentinel://s1/m?master=x', /unknown option "master" \(known: db, tls, tlsCaFile, tlsServername, sentinelTls, sentinelUsername, sentinelPassword\)/],
    ['redis+sentinel://s1/m?tlsServername=x', /option tlsServername needs TLS to the data nodes/],
    ['redis+sentinel://a%zz@s1/m', /the user name is not valid percent-encoding/],
    ['redis+sentinel://s1 s2/m', /sentinel 1 "s1 s2": "s1 s2" is not a host name/],
  ])('%s', (url, message) => {
    expect(() => parseRedisUrl(url)).toThrow(message);
    expect(() => loadConfig({ REDIS_URL: url })).toThrow(expect.objectContaining({ code: 'invalid_input', field: 'REDIS_URL', message: expect.stringMatching(/^configuration: REDIS_URL: /) }));
  });

  test('a TLS CA file that cannot be read is named when the connections are made', () => {
    expect(() => new RedisConnections('rediss+sentinel://s1/m?tlsCaFile=/nonexistent/ca.pem'))
      .toThrow(/REDIS_URL: option tlsCaFile: cannot read \/nonexistent\/ca\.pem: ENOENT/);
  });

  test('the WAIT timeout must be below the API\'s command bound', () => {
    expect(() => loadConfig({ CORRAL_REDIS_DURABLE_TIMEOUT_MS: '5000', CORRAL_REDIS_COMMAND_TIMEOUT_MS: '5000' })).toThrow(/CORRAL_REDIS_DURABLE_TIMEOUT_MS \(5000\) must be below CORRAL_REDIS_COMMAND_TIMEOUT_MS/);
  });
});

describe('secrets stay out of logs', () => {
  test.each([
    ['redis://:hunter2@redis:6379', 'redis://:***@redis:6379'],
    ['redis://hunter2@redis:6379', 'redis://***@redis:6379'],
    ['redis://corral:hunter2@redis', 'redis://corral:***@redis'],
    ['redis+sentinel://app:hunter2@s1,s2/m?sentinelPassword=hunter3&db=1', 'redis+sentinel://app:***@s1,s2/m?sentinelPassword=***&db=1'],
    ['redis+sentinel://s1/m?db=1&sentinelPassword=hunter3', 'redis+sentinel://s1/m?db=1&sentinelPassword=***'],
  ])('%s', (url, redacted) => {
    expect(redactRedisUrl(url)).toBe(redacted);
    expect(describeRedisTarget(parseRedisUrl(url))).not.toMatch(/hunter/);
  });

  test('an error about a bad URL does not repeat its password', () => {
    expect(() => parseRedisUrl('redis+sentinel://app:hunter2@s1,s2')).toThrow(expect.objectContaining({ message: expect.not.stringMatching(/hunter2/) }));
    expect(() => parseRedisUrl('redis//app:hunter2@s1')).toThrow(expect.objectContaining({ message: expect.not.stringMatching(/hunter2/) }));
  });
});
