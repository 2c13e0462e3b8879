/**
 * Auth off against a real browser (issue 38, break 6): Debian's chromium, a corral API with no
 * tokens on 127.0.0.1, and an attacker's site (attacker.test, mapped to 127.0.0.1 by chromium's own
 * resolver rules, served by a server of this test). The attacker's page tries to cancel the
 * operator's run with a no-cors fetch, an auto-submitted form and a sendBeacon, and to read the
 * operator's runs through DNS rebinding (rebind.test resolving to the API's address: same-origin to
 * the browser). The run stays queued, the reads get 421, and the API's log shows each refusal —
 * proof that the requests did reach it. The control: a page of the API's own origin cancels a run.
 *
 * Nothing leaves the machine: chromium's background traffic is off, its proxy is a closed port and
 * its resolver answers only the names mapped here.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync } from 'node:fs';
import puppeteer, { type Browser } from 'puppeteer-core';
import { startApiFixture, type ApiFixture } from '../support/api-fixture';
import { eventually } from '../support/eventually';

jest.setTimeout(120_000);

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

let fx: ApiFixture;
let api: string;
let apiPort: number;
let attacker: Server;
let attackerPort: number;
let browser: Browser;
const logged: Array<{ msg: string; fields?: Record<string, unknown> }> = [];
let attackPage = '';

beforeAll(async () => {
  if (!CHROMIUM) throw new Error('chromium is not installed (.ci/bootstrap installs Debian\'s chromium package)');
  fx = await startApiFixture({ tokens: null, deps: { log: (msg, fields) => logged.push({ msg, ...(fields ? { fields } : {}) }) } });
  api = await fx.app.listen({ host: '127.0.0.1', port: 0 });
  apiPort = Number(new URL(api).port);
  attacker = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(attackPage);
  });
  await new Promise<void>((r) => attacker.listen(0, '127.0.0.1', () => r()));
  attackerPort = (attacker.address() as AddressInfo).port;
  browser = await puppeteer.launch({
    executablePath: CHROMIUM, headless: true,
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-domain-reliability', '--disable-breakpad',
      '--proxy-server=http://127.0.0.1:9', '--proxy-bypass-list=attacker.test;rebind.test',
      '--host-resolver-rules=MAP attacker.test 127.0.0.1, MAP rebind.test 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
    ],
  });
});
afterAll(async () => {
  await browser?.close();
  await new Promise((r) => attacker?.close(r));
  await fx?.close();
});

async function queuedRun(): Promise<string> {
  const r = await fx.call('POST', '/v1/runs', { token: null, body: { task: 'the operator\'s run' }, headers: { host: `127.0.0.1:${apiPort}` } });
  expect(r.status).toBe(201);
  return r.json<{ id: string }>().id;
}

test('a cross-site page cannot cancel the operator\'s run (no-cors fetch, form, beacon); the refusals reach the API', async () => {
  const id = await queuedRun();
  const target = `http://127.0.0.1:${apiPort}/v1/runs/${id}/cancel`;
  attackPage = `<!doctype html><html><body>
    <form id="f" method="POST" action="${target}" target="sink"></form><iframe name="sink"></iframe>
    <script>
      window.done = (async () => {
        await fetch(${JSON.stringify(target)}, { method: 'POST', mode: 'no-cors' }).catch(() => undefined);
        await fetch(${JSON.stringify(target)}, { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: '{}' }).catch(() => undefined);
        navigator.sendBeacon(${JSON.stringify(target)});
        document.getElementById('f').submit();
        return 'sent';
      })();
    </script></body></html>`;
  const page = await browser.newPage();
  await page.goto(`http://attacker.test:${attackerPort}/`);
  expect(await page.evaluate('window.done')).toBe('sent');
  // Four attempts, each refused with 403 at the API: the browser did send them.
  await eventually(() => logged.filter((l) => l.msg === 'cross-origin state change refused (403)' && String(l.fields?.path).endsWith('/cancel')).length, { what: 'the API to refuse the four cross-site POSTs', until: (n) => n >= 4 });
  expect(logged.find((l) => l.msg.startsWith('cross-origin'))?.fields).toMatchObject({ secFetchSite: 'cross-site' });
  expect((await fx.store.get(id))?.status).toBe('queued');
  await page.close();
});

test('DNS rebinding: a page whose name now points at the API cannot read it (421), nor act through it', async () => {
  const id = await queuedRun();
  const page = await browser.newPage();
  // The attacker's name, re-pointed at the API's address: to the browser this is rebind.test's own origin.
  const res = await page.goto(`http://rebind.test:${apiPort}/v1/runs/${id}`);
  expect(res?.status()).toBe(421);
  expect(await page.evaluate('document.body.innerText')).toContain('misdirected_request');
  const inside = await page.evaluate(async (runId: string) => {
    const list = await fetch('/v1/runs');
    const cancel = await fetch(`/v1/runs/${runId}/cancel`, { method: 'POST' });
    return { list: list.status, listBody: await list.text(), cancel: cancel.status };
  }, id);
  expect(inside).toMatchObject({ list: 421, cancel: 421 });
  expect(inside.listBody).not.toContain(id);
  expect((await fx.store.get(id))?.status).toBe('queued');
  expect(logged.some((l) => l.msg === 'request for another host refused (421)' && String(l.fields?.host).startsWith('rebind.test'))).toBe(true);
  await page.close();
});

test('the control: a page of the API\'s own origin (as the console is) cancels a run', async () => {
  const id = await queuedRun();
  const page = await browser.newPage();
  await page.goto(`${api}/openapi.json`);
  const status = await page.evaluate(async (runId: string) => (await fetch(`/v1/runs/${runId}/cancel`, { method: 'POST' })).status, id);
  expect(status).toBe(200);
  expect((await fx.store.get(id))?.status).toBe('cancelled');
  await page.close();
});
