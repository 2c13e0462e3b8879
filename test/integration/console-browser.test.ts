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
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { CONSOLE_CSP } from '../../src/console/console-routes';
import { apiRequest } from '../support/api-request';
import { decisionsAnswer, promptText } from '../support/fake-decisions-server';
import { finalTurn, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { startHarness, type Harness } from '../support/corral-harness';
import { eventually } from '../support/eventually';
import { makeTar } from '../support/make-tar';

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
  // A change of every line of a 100 KB file: a patch of about 200 KB.
  'CONSOLE-FILES': [
    toolCallTurn([{ name: 'bash', args: { command: "sed -i 's/^/changed /' big.txt && printf '\\000\\001\\002' > logo.bin" } }]),
    finalTurn('changed every line'),
  ],
  'CONSOLE-DIR': [toolCallTurn([{ name: 'bash', args: { command: 'cat sub/hello.txt' } }]), finalTurn('read the directory')],
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

test('the new-run form takes a tar file, a directory, a git remote, budgets and an environment; the run page downloads every file; a 200 KB patch renders', async () => {
  const work = mkdtempSync(join(tmpdir(), 'corral-console-files-'));
  try {
    const { page, errors } = await newPage(1280);
    await signIn(page);
    // A tar file, budgets and the environment from the form.
    const lines = Array.from({ length: 4000 }, (_, i) => `line ${String(i).padStart(5, '0')} of the big file`).join('\n');
    writeFileSync(join(work, 'ws.tar'), await makeTar([{ name: 'big.txt', body: `${lines}\n` }, { name: 'README.md', body: '# hi\n' }]));
    await page.goto(`${h.url}/ui#/new`);
    await page.waitForSelector('#task');
    await page.type('#task', '# Task\nCONSOLE-FILES: change every line\n');
    await page.select('#ws-kind', 'tar');
    await (await page.$('#ws-tar'))!.uploadFile(join(work, 'ws.tar'));
    await page.type('#budget-llmCalls', '7');
    await page.type('#budget-wallTimeS', '300');
    await page.select('#environment', 'default');
    await shot(page, '10-new-run-tar');
    await page.click('#submit-run');
    await page.waitForFunction('/^#\\/runs\\/run_/.test(location.hash)');
    const id = (await page.evaluate('location.hash') as string).slice('#/runs/'.length);
    const run = await waitRun(id, (r) => !!r.finishedAt);
    expect(run).toMatchObject({ status: 'succeeded', budgets: { llmCalls: { limit: 7 }, wallTimeS: { limit: 300 } } });

    // Every file of the run downloads from its page (the bearer header, never the token in a URL).
    const downloads = join(work, 'downloads');
    mkdirSync(downloads);
    const cdp = await page.createCDPSession();
    await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: downloads });
    await page.waitForSelector('#downloads button[data-download=report]', { timeout: 30_000 });
    const buttons = await page.$$eval('#downloads button', (b) => b.map((x) => x.getAttribute('data-download')));
    expect(buttons).toEqual(['patch', 'tar', 'log', 'report']);
    for (const b of buttons) await page.click(`#downloads button[data-download=${b}]`);
    const names = [`${id}-workspace.patch`, `${id}-workspace.tar`, `${id}-events.jsonl`, `${id}-report.md`];
    await eventually(() => readdirSync(downloads).sort().join(), { what: 'the four downloads', until: (v) => v === [...names].sort().join() });
    const patch = (await api<string>('GET', `/v1/runs/${id}/artifacts/patch`)).body;
    expect(readFileSync(join(downloads, `${id}-workspace.patch`), 'utf8')).toBe(patch);
    expect(readFileSync(join(downloads, `${id}-report.md`), 'utf8')).toContain('succeeded');

    // The patch tab: about 200 KB rendered; its time goes to test-output (measured, not asserted).
    expect(patch.length).toBeGreaterThan(190_000);
    // From the click to the patch laid out and painted (its fetch included), in the page's own clock.
    const clickToPaint = await page.evaluate(`(async () => {
      const t0 = performance.now();
      document.querySelector('#tab-patch').click();
      while (!document.querySelector('#patch .add')) await new Promise((r) => setTimeout(r, 5));
      document.querySelector('#patch').getBoundingClientRect();
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      return performance.now() - t0;
    })()`) as number;
    const ms = await page.evaluate('window.__corralPatchMs') as number;
    expect(await page.$eval('#patch', (n) => n.textContent)).toContain('GIT binary patch (');
    const measured = { patchBytes: patch.length, lines: patch.split('\n').length, buildMs: Math.round(ms), clickToPaintMs: Math.round(clickToPaint) };
    writeFileSync(join(OUT, 'patch-render.json'), `${JSON.stringify(measured)}\n`);
    console.log(`console: a ${measured.patchBytes}-byte patch (${measured.lines} lines): built in ${measured.buildMs} ms, click to paint ${measured.clickToPaintMs} ms`);
    await page.screenshot({ path: join(OUT, '11-big-patch.png') });

    // A directory: packed in the page, uploaded, named by its id.
    mkdirSync(join(work, 'proj', 'sub'), { recursive: true });
    writeFileSync(join(work, 'proj', 'sub', 'hello.txt'), 'hello from a directory\n');
    writeFileSync(join(work, 'proj', `${'long-name-'.repeat(12)}.txt`), 'a name past 100 bytes\n');
    mkdirSync(join(work, 'proj', 'node_modules'));
    writeFileSync(join(work, 'proj', 'node_modules', 'left-out.js'), 'x');
    await page.goto(`${h.url}/ui#/new`);
    await page.waitForSelector('#task');
    await page.type('#task', '# Task\nCONSOLE-DIR: read it\n');
    await page.select('#ws-kind', 'dir');
    await (await page.$('#ws-dir'))!.uploadFile(join(work, 'proj'));
    await page.type('#ws-exclude', 'node_modules');
    await page.click('#submit-run');
    await page.waitForFunction('/^#\\/runs\\/run_/.test(location.hash)');
    const dirRun = (await page.evaluate('location.hash') as string).slice('#/runs/'.length);
    expect(await waitRun(dirRun, (r) => !!r.finishedAt)).toMatchObject({ status: 'succeeded' });
    const tar = (await fetch(`${h.url}/v1/runs/${dirRun}/artifacts/workspace.tar`, { headers: { authorization: `Bearer ${TOKEN}` } }));
    const tarText = Buffer.from(await tar.arrayBuffer()).toString('latin1');
    expect(tarText).toContain('hello from a directory');
    expect(tarText).toContain('a name past 100 bytes');
    expect(tarText).not.toContain('left-out.js');

    // A git remote: sent as workspace.git (this server allows none, so its refusal names the field).
    await page.goto(`${h.url}/ui#/new`);
    await page.waitForSelector('#task');
    await page.type('#task', 'CONSOLE-GIT: clone it');
    await page.select('#ws-kind', 'git');
    await page.type('#git-url', 'https://git.example.com/acme/app.git');
    await page.type('#git-ref', 'main');
    await page.click('#git-bundle');
    await page.click('#submit-run');
    await page.waitForFunction('/workspace\\.git\\.url/.test(document.querySelector("[role=alert]")?.textContent ?? "")');
    await shot(page, '12-new-run-git-refused');
    errors.length = 0; // the refused submission's 400 is logged by the browser
    expect(errors).toEqual([]);
    await page.close();
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});
