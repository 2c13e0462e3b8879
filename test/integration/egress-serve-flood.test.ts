/**
 * Done means of the egress issue, measured for real: `corral serve` with 2 slots; one run floods its
 * egress proxy (12,000 CONNECTs with 15,000-character names from 8 threads; the bench runs 36,000)
 * while another run works. The service stays up, the other run succeeds, the worker process's peak RSS stays under 400 MB and
 * the attacker's events.jsonl under 20 MB (correctness bounds, not timings). The figures are printed
 * by `npm run bench` (stage egress).
 */
import { serveFlood } from '../support/serve-flood';

jest.setTimeout(300_000);

test('a run flooding its proxy leaves corral serve up; the other run succeeds; RSS < 400 MB; the attacker\'s log < 20 MB', async () => {
  const r = await serveFlood({ redisUrl: process.env.REDIS_URL!, rounds: 1 });
  expect(r.other).toMatchObject({ status: 'succeeded' });
  expect(r.readyAfter).toBe(true);
  expect(r.floodAttempts).toBe(12_000);
  expect(r.attacker.aggregatedAttempts).toBeGreaterThan(10_000);
  // corral serve is a supervisor with the API and the worker as children: the flood is the worker's.
  expect(r.processRssPeakMb.worker).toBeLessThan(400);
  expect(r.attacker.logBytes).toBeLessThan(20 * 1024 * 1024);
  expect(r.attacker.events).toBeLessThan(2000);
});
