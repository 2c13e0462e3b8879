/** The +switch-master message SentinelWatch acts on (the reconnects themselves: test/integration/redis-failover.test.ts). */
import { parseSwitchMaster } from '../../src/queue/sentinel-watch';

test('a +switch-master message names the master and its new address', () => {
  expect(parseSwitchMaster('corral 127.0.0.1 6379 127.0.0.1 6380')).toEqual({ master: 'corral', host: '127.0.0.1', port: 6380 });
  expect(parseSwitchMaster('corral redis-primary 6379 redis-replica 6379')).toEqual({ master: 'corral', host: 'redis-replica', port: 6379 });
});

test.each([
  ['too few parts', 'corral 127.0.0.1 6379 127.0.0.1'],
  ['too many parts', 'corral 127.0.0.1 6379 127.0.0.1 6380 extra'],
  ['a port that is not a number', 'corral 127.0.0.1 6379 127.0.0.1 port'],
  ['port 0', 'corral 127.0.0.1 6379 127.0.0.1 0'],
  ['empty', ''],
])('%s is ignored', (_what, message) => {
  expect(parseSwitchMaster(message)).toBeUndefined();
});
