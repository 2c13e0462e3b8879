/**
 * The web console in a real browser: Debian's chromium driven by puppeteer-core (no browser
 * download), against a whole corral (API + worker, real engine, Redis, scripted model) with auth on.
 * Sign in with a tenant token, submit a run from the page, watch its timeline arrive live, answer the
 * pending approval in the page with a name, see the run finish and open its report and patch.
 * A run whose task, tool output, final answer and file names carry `<script>`, `<img onerror>` and
 * `javascript:` links renders them as text: no script of theirs runs, no element of theirs exists.
 * The page's CSP allows no inline script and no other origin. Screenshots of each page, at 1280 px and
 * at a phone's 390 px, go to test-output/console/.
 *
 * Nothing leaves the machine: chromium's own background traffic is off, its proxy for anything but
 * loopback is a closed port and its resolver answers only 127.0.0.1.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { CONSOLE_CSP } from '../../src/console/console-routes';
import { apiRequest } from '../support/api-request';
import { decisionsAnswer, promptText } from '../support/fake-decisions-server';
import { finalTurn, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { startHarness, type Harness } from '../support/corral-harness';
import { eventually } from '../support/eventually';

jest.setTimeout(240_000);

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
const TOKEN = 'console-test-token-0123456789';
const OUT = join(__dirname, '..', '..', 'test-output', 'console');
const XSS = {
  script: '<script>window.__pwned = "script"</script>',
  img: '<img src=x onerror="window.__pwned = \'img\'">',
  link: '[click me](javascript:window.__pwned="link")',
  raw: '<a href="javascript:window.__pwned=\'a\'">a link</a>',
};

const agent = scriptedAgent({
  'CONSOLE-APPROVE': [
    toolCallTurn([{ name: 'bash', args: { command: 'rm -r notes.txt 2>/dev/null; echo removed > gone.txt; echo removed' } }]),
    finalTurn('removed it'),
  ],
  'CONSOLE-XSS': [
    toolCallTurn([{ name: 'bash', args: { command: `printf '%s\\n' '${XSS.script}' '${XSS.img.replace(/'/g, '')}' '${XSS.raw.replace(/'/g, '')}' && printf x > '<img src=x onerror=alert(1)>.txt'` } }]),
    finalTurn(`Done. ${XSS.script} ${XSS.img} ${XSS.link} ${XSS.raw}`),
  ],
});

let h: Harness;
let browser: Browser;

beforeAll(async () => {
  if (!CHROMIUM) throw new Error('chromium is not installed (.ci/bootstrap installs Debian\'s chromium package)');
  mkdirSync(OUT, { recursive: true });
  h = await startHarness('console', {
    chat: agent,
    decisions: (body) => (promptText(body).includes('rm -r notes.txt') ? decisionsAnswer(1.2, 0.4) : decisionsAnswer(0.1, 0.95)),
  }, { CORRAL_API_TOKENS: `acme=${TOKEN}` });
  browser = await puppeteer.launch({
    executablePath: CHROMIUM, headless: true,
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-domain-reliability', '--disable-breakpad',
      '--proxy-server=http://127.0.0.1:9', '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
    ],
  });
});
afterAll(async () => {
  await browser?.close();
  await h?.close();
});

const api = <T = Record<string, unknown>>(method: string, path: string, body?: unknown) =>
  apiRequest<T>(h.url, method, path, body, { authorization: `Bearer ${TOKEN}` });

async function waitRun(id: string, until: (r: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  return eventually(async () => (await api('GET', `/v1/runs/${id}`)).body, { what: `run ${id} in the expected state`, until, timeoutMs: 120_000, intervalMs: 200 });
}

async function newPage(width: number): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage();
  await page.setViewport({ width, height: 900 });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  return { page, errors };
}

const shot = (page: Page, name: string) => page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });

async function signIn(page: Page): Promise<void> {
  await page.goto(`${h.url}/ui`);
  await page.waitForSelector('#token');
  await page.type('#token', TOKEN);
  await page.click('#signin');
  await page.waitForFunction('location.hash === "#/runs"');
}

test('the console\'s pages carry a strict CSP and no third-party origin', async () => {
  for (const path of ['/ui', '/ui/console.js', '/ui/console.css']) {
    const res = await fetch(`${h.url}${path}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const text = await res.text();
    expect(text).not.toMatch(/https?:\/\/(?!127\.0\.0\.1)[a-z]/i);
    if (path === '/ui') expect(text).not.toMatch(/<script(?![^>]*src="\/ui\/console\.js")/);
  }
  expect(CONSOLE_CSP).toContain("script-src 'self'");
  expect(CONSOLE_CSP).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
});

test('sign in, submit a run, watch it live, approve its pending call in the page, see it finish and read its report and patch', async () => {
  const { page, errors } = await newPage(1280);
  await page.goto(`${h.url}/ui`);
  await page.waitForSelector('#token');
  await shot(page, '1-sign-in');
  // A wrong token is refused, and nothing is kept.
  await page.type('#token', 'not-the-token-at-all');
  await page.click('#signin');
  await page.waitForFunction('/not valid/.test(document.querySelector("[role=alert]")?.textContent ?? "")');
  expect(await page.evaluate('sessionStorage.getItem("corral.token")')).toBeNull();
  errors.length = 0; // the browser logs the refused sign-in's 401; from here on nothing may fail
  await page.$eval('#token', (i) => { (i as unknown as { value: string }).value = ''; });
  await page.type('#token', TOKEN);
  await page.click('#signin');
  await page.waitForFunction('location.hash === "#/runs"');
  expect(page.url()).not.toContain(TOKEN);
  expect(await page.evaluate('localStorage.length')).toBe(0);

  await page.goto(`${h.url}/ui#/new`);
  await page.waitForSelector('#task');
  await page.type('#task', '# Task\nCONSOLE-APPROVE: remove notes.txt\n');
  await shot(page, '2-new-run');
  await page.click('#submit-run');
  await page.waitForFunction('/^#\\/runs\\/run_/.test(location.hash)');
  const id = (await page.evaluate('location.hash') as string).slice('#/runs/'.length);

  // Live: the pending call shows what and why, with Approve / Deny.
  await page.waitForSelector('.approval button[data-action=approve]', { timeout: 60_000 });
  const approval = await page.$eval('.approval', (n) => n.textContent ?? '');
  expect(approval).toContain('Approve bash?');
  expect(approval).toContain('rm -r notes.txt');
  expect(await page.$$eval('#timeline li', (l) => l.map((x) => x.getAttribute('data-type')))).toEqual(expect.arrayContaining(['run.started', 'tool.call', 'approval.pending']));
  await shot(page, '3-run-awaiting-approval');
  // Approve with a note: the signed-in token is who answered (the server records it), the note goes beside it.
  // The live page re-renders the panel as events arrive: locators find the element again (a handle may be detached).
  await page.locator('.approval input[name=note]').fill('Ada in the browser');
  await page.locator('.approval button[data-action=approve]').click();
  await page.waitForFunction('document.querySelector("#run-status")?.textContent === "succeeded"', { timeout: 60_000 });
  await page.waitForSelector('#timeline li[data-type="run.finished"]');
  const run = (await api('GET', `/v1/runs/${id}`)).body;
  expect(run).toMatchObject({ status: 'succeeded', tenant: 'acme' });
  const log = (await api<string>('GET', `/v1/runs/${id}/logs`)).body;
  expect(String(log)).toContain('"note":"Ada in the browser"');
  expect(String(log)).toMatch(/"approval":\{"approved":true,"by":"acme\/[A-Za-z0-9_.-]+"/);
  await shot(page, '4-run-finished');

  await page.click('#tab-report');
  await page.waitForSelector('#report h1');
  expect(await page.$eval('#report', (n) => n.textContent)).toMatch(/succeeded/);
  await shot(page, '5-report');
  await page.click('#tab-patch');
  await page.waitForSelector('#patch .add');
  expect(await page.$eval('#patch', (n) => n.textContent)).toContain('+removed');
  await shot(page, '6-patch');

  // The list shows it, filters and live status.
  await page.goto(`${h.url}/ui#/runs`);
  await page.waitForSelector(`tr[data-run="${id}"]`);
  await page.select('#status-filter', 'failed');
  await page.waitForFunction(`!document.querySelector('tr[data-run="${id}"]')`);
  await page.select('#status-filter', 'succeeded');
  await page.waitForSelector(`tr[data-run="${id}"]`);
  await shot(page, '7-runs');
  expect(errors).toEqual([]);
  await page.close();
});

test('markup from the task, the model, tool output and file names renders inert, at 1280 px and on a phone', async () => {
  const created = await api<{ id: string }>('POST', '/v1/runs', {
    task: `CONSOLE-XSS: ${XSS.script} ${XSS.img} ${XSS.link}`,
    workspace: { files: { 'a.txt': 'a\n' } },
  });
  expect(created.status).toBe(201);
  const id = created.body.id;
  await waitRun(id, (r) => !!r.finishedAt);
  for (const [width, tag] of [[1280, 'wide'], [390, 'phone']] as const) {
    const { page, errors } = await newPage(width);
    await signIn(page);
    await page.goto(`${h.url}/ui#/runs/${id}`);
    await page.waitForSelector('#timeline li[data-type="run.finished"]', { timeout: 60_000 });
    const text = await page.$eval('main', (n) => n.textContent ?? '');
    expect(text).toContain(XSS.script);
    expect(text).toContain('onerror');
    expect(text).toContain('javascript:window.__pwned');
    await shot(page, `8-xss-timeline-${tag}`);
    for (const tab of ['report', 'patch']) {
      await page.click(`#tab-${tab}`);
      await page.waitForSelector(`#${tab}`);
      await shot(page, `9-xss-${tab}-${tag}`);
    }
    expect(await page.$eval('#patch', (n) => n.textContent)).toContain('<img src=x onerror=alert(1)>.txt');
    const found = await page.evaluate(`({
      pwned: window.__pwned ?? null,
      scripts: [...document.scripts].map((s) => s.getAttribute('src')),
      imgs: document.images.length,
      jsLinks: [...document.querySelectorAll('a')].filter((a) => !(a.getAttribute('href') ?? '').startsWith('#/')).length,
      overflow: document.documentElement.scrollWidth > window.innerWidth + 1,
    })`);
    expect(found).toEqual({ pwned: null, scripts: ['/ui/console.js'], imgs: 0, jsLinks: 0, overflow: false });
    expect(errors).toEqual([]);
    await page.close();
  }
});
