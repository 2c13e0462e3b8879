// corral's web console: one static script, no build step, no third-party code. Everything it shows
// comes from untrusted parties (task text, model output, tool output, file names), so nothing is ever
// parsed as HTML: every string goes into the page through textContent, links are only the console's
// own "#/..." routes, and the page's Content-Security-Policy allows no inline script and no other
// origin. The tenant token is kept in sessionStorage (never in a URL) and sent as a bearer header.
'use strict';

(() => {
  const TOKEN_KEY = 'corral.token';
  const main = document.getElementById('main');
  const nav = document.getElementById('nav');
  let stopView = () => {};

  // ---- DOM helpers: text only ------------------------------------------------------------------
  function el(tag, props, ...children) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') n.className = v;
      else if (k === 'text') n.textContent = String(v);
      else if (k === 'href') n.setAttribute('href', String(v).startsWith('#/') ? v : '#/runs');
      // a link out of the console (the operator's trace viewer): http(s) only, opened apart
      else if (k === 'external-href') { if (/^https?:\/\//.test(String(v))) { n.setAttribute('href', String(v)); n.setAttribute('target', '_blank'); n.setAttribute('rel', 'noopener noreferrer'); } }
      else if (k === 'on') for (const [ev, fn] of Object.entries(v)) n.addEventListener(ev, fn);
      else if (k.startsWith('data-') || k.startsWith('aria-') || ['type', 'name', 'id', 'value', 'placeholder', 'for', 'role', 'autocomplete', 'accept', 'min', 'max', 'step', 'inputmode'].includes(k)) n.setAttribute(k, String(v));
      else if (k === 'multiple' || k === 'webkitdirectory') n.setAttribute(k, '');
      else if (k === 'checked' || k === 'disabled' || k === 'hidden') n[k] = Boolean(v);
      else if (k === 'style-width') n.style.width = v;
    }
    for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) n.append(typeof c === 'string' ? document.createTextNode(c) : c);
    return n;
  }
  const show = (...nodes) => main.replaceChildren(...nodes);
  const clip = (s, n) => { const t = String(s ?? ''); return t.length > n ? `${t.slice(0, n)}…` : t; };
  const json = (v) => { try { return JSON.stringify(v, null, 2); } catch { return String(v); } };

  // ---- API ----------------------------------------------------------------------------------------
  const token = () => sessionStorage.getItem(TOKEN_KEY);
  const headers = (extra) => ({ ...(token() ? { authorization: `Bearer ${token()}` } : {}), ...extra });
  async function api(method, path, body) {
    const res = await fetch(path, { method, headers: headers(body === undefined ? {} : { 'content-type': 'application/json' }), body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    let data = text;
    try { data = JSON.parse(text); } catch { /* text (report, patch) */ }
    if (res.status === 401) { sessionStorage.removeItem(TOKEN_KEY); location.hash = '#/signin'; }
    if (!res.ok) {
      const msg = data && typeof data === 'object' && data.error ? `${data.error.code}: ${data.error.message}` : `HTTP ${res.status}`;
      throw Object.assign(new Error(msg), { status: res.status });
    }
    return data;
  }
  const runPath = (id) => `/v1/runs/${encodeURIComponent(id)}`;

  // ---- sign in --------------------------------------------------------------------------------------
  function signIn(note) {
    nav.hidden = true;
    const input = el('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', placeholder: 'tenant token' });
    const err = el('p', { class: 'error', role: 'alert', text: note || '' });
    const form = el('form', { class: 'stack', on: { submit: async (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      try {
        await api('GET', '/v1/runs?limit=1');
        location.hash = '#/runs';
      } catch (x) {
        sessionStorage.removeItem(TOKEN_KEY);
        err.textContent = x.status === 401 ? 'That token is not valid for this server.' : `Cannot reach the API: ${x.message}`;
      }
    } } },
    el('label', { for: 'token', text: 'Tenant token (kept in this tab only; leave empty when the server has no auth)' }), input,
    el('button', { class: 'primary', type: 'submit', id: 'signin', text: 'Sign in' }), err);
    show(el('h1', { text: 'Sign in' }), form);
    input.focus();
  }

  // ---- runs list ------------------------------------------------------------------------------------
  const STATUSES = ['', 'queued', 'running', 'awaiting_approval', 'awaiting_children', 'succeeded', 'failed', 'budget_exhausted', 'policy_aborted', 'cancelled', 'timed_out', 'setup_failed', 'error'];
  function runsView() {
    const filter = el('input', { type: 'text', id: 'filter', placeholder: 'filter by task or id' });
    const status = el('select', { id: 'status-filter', 'aria-label': 'status' }, STATUSES.map((s) => el('option', { value: s, text: s || 'any status' })));
    const body = el('tbody');
    const err = el('p', { class: 'error', role: 'alert' });
    const updated = el('span', { class: 'muted' });
    let runs = [];
    const render = () => {
      const q = filter.value.trim().toLowerCase();
      const rows = runs.filter((r) => (!status.value || r.status === status.value) && (!q || r.id.toLowerCase().includes(q) || String(r.task).toLowerCase().includes(q)));
      body.replaceChildren(...(rows.length ? rows.map((r) => el('tr', { 'data-run': r.id },
        el('td', {}, el('a', { href: `#/runs/${r.id}`, text: r.id })),
        el('td', {}, el('span', { class: `status ${r.status}`, text: r.status })),
        el('td', { class: 'task', text: clip(r.task, 140) }),
        el('td', { class: 'hide-narrow muted', text: new Date(r.createdAt).toLocaleString() }),
      )) : [el('tr', {}, el('td', { text: runs.length ? 'No run matches.' : 'No runs yet.' }))]));
    };
    const load = async () => {
      try {
        runs = (await api('GET', '/v1/runs?limit=100')).runs;
        err.textContent = '';
        updated.textContent = `updated ${new Date().toLocaleTimeString()}`;
        render();
      } catch (x) { err.textContent = x.message; }
    };
    filter.addEventListener('input', render);
    status.addEventListener('change', render);
    show(el('h1', { text: 'Runs' }), el('div', { class: 'toolbar' }, filter, status, el('a', { href: '#/new', text: 'New run' }), updated), err,
      el('table', { class: 'runs' }, el('thead', {}, el('tr', {}, el('th', { text: 'Run' }), el('th', { text: 'Status' }), el('th', { text: 'Task' }), el('th', { class: 'hide-narrow', text: 'Created' }))), body));
    void load();
    const t = setInterval(load, 2000);
    return () => clearInterval(t);
  }

  // ---- new run ---------------------------------------------------------------------------------------
  // A workspace from the browser: a directory (packed into a tar here, from the File objects as they
  // are: the browser reads them while the upload streams) or a tar file, sent with PUT /v1/workspaces
  // and named by the id it answers; or a git remote the worker clones.
  const enc = new TextEncoder();
  function tarHeader(name, size, type) {
    const h = new Uint8Array(512);
    const put = (s, at, len) => h.set(enc.encode(s).subarray(0, len), at);
    const octal = (n, len) => `${n.toString(8).padStart(len - 1, '0')}\0`;
    put(name, 0, 100);
    put(octal(0o644, 8), 100, 8); put(octal(0, 8), 108, 8); put(octal(0, 8), 116, 8);
    put(octal(size, 12), 124, 12); put(octal(0, 12), 136, 12);
    h.fill(32, 148, 156);
    put(type, 156, 1); put('ustar\0', 257, 6); put('00', 263, 2);
    const sum = h.reduce((a, b) => a + b, 0);
    put(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
    return h;
  }
  const padding = (size) => new Uint8Array((512 - (size % 512)) % 512);
  /** A PAX record "LEN path=NAME\n" (LEN counts itself) for names a ustar header cannot hold. */
  function paxPath(name) {
    const body = ` path=${name}\n`;
    let len = enc.encode(body).length + 1;
    while (String(len).length + enc.encode(body).length !== len) len = String(len).length + enc.encode(body).length;
    return enc.encode(`${len}${body}`);
  }
  /** The files of a picked directory (paths below it) as one uncompressed tar Blob; nothing is read yet. */
  function tarOf(entries) {
    const parts = [];
    for (const { path, file } of entries) {
      if (enc.encode(path).length > 99) {
        const pax = paxPath(path);
        parts.push(tarHeader('././@PaxHeader', pax.length, 'x'), pax, padding(pax.length));
      }
      parts.push(tarHeader(path, file.size, '0'), file, padding(file.size));
    }
    parts.push(new Uint8Array(1024));
    return new Blob(parts, { type: 'application/x-tar' });
  }
  async function upload(blob, type) {
    const res = await fetch('/v1/workspaces', { method: 'PUT', headers: headers({ 'content-type': type }), body: blob });
    const data = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(data.error ? `${data.error.code}: ${data.error.message}` : `upload: HTTP ${res.status}`);
    return data;
  }
  const BUDGETS = [['llmCalls', 'LLM calls'], ['toolCalls', 'tool calls'], ['tokens', 'tokens'], ['wallTimeS', 'wall time (s)'], ['costUsd', 'cost (USD)']];

  function newRunView() {
    const task = el('textarea', { id: 'task', name: 'task', placeholder: '# Task\n…\n\n# Done means\n- check: python3 -m pytest -q' });
    const approvals = el('input', { type: 'checkbox', id: 'approvals', checked: true });
    const environment = el('select', { id: 'environment', 'aria-label': 'environment' }, el('option', { value: 'default', text: 'default' }));
    const kind = el('select', { id: 'ws-kind', 'aria-label': 'workspace' }, [['none', 'no files'], ['dir', 'a directory'], ['tar', 'a tar file (.tar, .tar.gz)'], ['git', 'a git remote']].map(([v, t]) => el('option', { value: v, text: t })));
    const dir = el('input', { type: 'file', id: 'ws-dir', webkitdirectory: true, multiple: true, 'aria-label': 'directory' });
    const exclude = el('input', { type: 'text', id: 'ws-exclude', placeholder: 'leave out (names, comma-separated): node_modules, .venv' });
    const tarFile = el('input', { type: 'file', id: 'ws-tar', accept: '.tar,.tar.gz,.tgz,application/x-tar,application/gzip', 'aria-label': 'tar file' });
    const gitUrl = el('input', { type: 'text', id: 'git-url', placeholder: 'git remote URL (one of the server\'s CORRAL_GIT_REMOTES)' });
    const gitRef = el('input', { type: 'text', id: 'git-ref', placeholder: 'branch, tag or commit (default: the remote\'s HEAD)' });
    const gitBundle = el('input', { type: 'checkbox', id: 'git-bundle' });
    const parts = {
      dir: el('div', { class: 'stack', hidden: true }, dir, exclude),
      tar: el('div', { class: 'stack', hidden: true }, tarFile),
      git: el('div', { class: 'stack', hidden: true }, gitUrl, gitRef, el('label', {}, gitBundle, ' return my commits as a git bundle')),
    };
    kind.addEventListener('change', () => { for (const [k, n] of Object.entries(parts)) n.hidden = k !== kind.value; });
    const budgets = Object.fromEntries(BUDGETS.map(([k]) => [k, el('input', { type: 'number', id: `budget-${k}`, min: '0', step: 'any', inputmode: 'decimal', placeholder: 'default' })]));
    const progress = el('p', { class: 'muted', id: 'submit-progress' });
    const err = el('p', { class: 'error', role: 'alert' });
    api('GET', '/v1/environments').then((r) => environment.replaceChildren(...r.environments.map((e) => el('option', { value: e.name, text: `${e.name} — ${clip(e.description, 60)}` }))), () => undefined);
    const workspace = async () => {
      if (kind.value === 'git') {
        return { git: { url: gitUrl.value.trim(), ...(gitRef.value.trim() ? { ref: gitRef.value.trim() } : {}), bundle: gitBundle.checked } };
      }
      if (kind.value === 'tar') {
        const f = tarFile.files && tarFile.files[0];
        if (!f) throw new Error('pick a tar file, or another kind of workspace');
        const head = new Uint8Array(await f.slice(0, 2).arrayBuffer());
        progress.textContent = `uploading ${f.name} (${f.size} bytes)…`;
        return { id: (await upload(f, head[0] === 0x1f && head[1] === 0x8b ? 'application/gzip' : 'application/x-tar')).id };
      }
      if (kind.value === 'dir') {
        const leave = exclude.value.split(',').map((s) => s.trim()).filter(Boolean);
        const entries = [...(dir.files || [])]
          .map((file) => ({ file, path: (file.webkitRelativePath || file.name).split('/').slice(1).join('/') }))
          .filter((e) => e.path && !e.path.split('/').some((seg) => leave.includes(seg)));
        if (!entries.length) throw new Error('pick a directory with files in it');
        const bytes = entries.reduce((n, e) => n + e.file.size, 0);
        progress.textContent = `uploading ${entries.length} file(s), ${bytes} bytes…`;
        return { id: (await upload(tarOf(entries), 'application/x-tar')).id };
      }
      return undefined;
    };
    show(el('h1', { text: 'New run' }), el('form', { class: 'stack', on: { submit: async (e) => {
      e.preventDefault();
      err.textContent = '';
      try {
        const spec = { task: task.value, approvals: approvals.checked, environment: environment.value };
        const b = Object.fromEntries(Object.entries(budgets).filter(([, i]) => i.value.trim() !== '').map(([k, i]) => [k, Number(i.value)]));
        if (Object.keys(b).length) spec.budgets = b;
        const ws = await workspace();
        if (ws) spec.workspace = ws;
        progress.textContent = 'submitting…';
        const r = await api('POST', '/v1/runs', spec);
        location.hash = `#/runs/${r.id}`;
      } catch (x) { err.textContent = x.message; progress.textContent = ''; }
    } } },
    el('label', { for: 'task', text: 'Task (markdown: # Task, # Cannot do, # Done means)' }), task,
    el('label', { for: 'ws-kind', text: 'Workspace' }), kind, parts.dir, parts.tar, parts.git,
    el('label', { for: 'environment', text: 'Environment' }), environment,
    el('fieldset', { class: 'budget-fields' }, el('legend', { text: 'Budgets (empty: the server\'s defaults)' }),
      BUDGETS.map(([k, label]) => el('label', { for: `budget-${k}` }, `${label} `, budgets[k]))),
    el('label', {}, approvals, ' Ask me about calls the policy cannot settle (otherwise they are refused)'),
    el('button', { class: 'primary', type: 'submit', id: 'submit-run', text: 'Submit' }), progress, err));
    task.focus();
    return () => {};
  }

  // ---- one run ---------------------------------------------------------------------------------------
  function describe(e) {
    switch (e.type) {
      case 'run.started': return ['Run started', `on ${e.workerId} · model ${e.model} · policy ${e.policy} · approvals ${e.approvals ? 'on' : 'off'}`];
      case 'sandbox.ready': return ['Sandbox ready', `${e.image} in ${e.ms} ms · egress ${e.egressAllow.length ? e.egressAllow.join(', ') : 'none'}`];
      case 'model.response': return [`Model turn ${e.turn}`, e.content ? clip(e.content, 2000) : (e.toolCalls || []).map((c) => c.name).join(', ') || '(no text)'];
      case 'tool.call': return [`Tool call: ${e.tool}`, null, json(e.args)];
      case 'policy.decision': return [`Gate: ${e.verdict.decision}`, e.verdict.reason, null, e.verdict.decision];
      case 'approval.pending': return ['Waiting for approval', `${e.tool}: ${e.reason}`, null, 'ask'];
      case 'approval.answered': case 'approval.resolved': return ['Approval answered', `${e.decision ?? ''} ${e.by ? `by ${e.by}` : ''}`];
      case 'tool.result': return [`Result: ${e.ok ? 'ok' : 'failed'}${e.blocked ? ' (blocked)' : ''}`, e.summary, e.output || null, e.ok ? 'allow' : 'deny'];
      case 'egress': return [`Egress ${e.decision}`, `${e.method} ${e.host}:${e.port} — ${e.reason}`, null, e.decision];
      case 'egress.aggregate': return ['Egress (repeated)', e.reason, null, e.decision];
      case 'done.check': return [`Done check ${e.ok ? 'passed' : 'failed'}`, e.command, e.summary || null, e.ok ? 'allow' : 'deny'];
      case 'setup.command': return [`Setup command ${e.index}: exit ${e.exitCode ?? 'none'}`, e.command, e.output || null, e.exitCode === 0 ? 'allow' : 'deny'];
      case 'budget.warning': return ['Budget warning', `${e.budget}: ${e.used} of ${e.limit}`];
      case 'run.finished': return [`Finished: ${e.outcome}`, e.reason, e.finalAnswer || null, e.outcome === 'succeeded' ? 'allow' : 'deny'];
      case 'context.loaded': return ['Context loaded', `AGENTS.md ${e.agentsMd ? 'read' : 'none'} · ${(e.skills || []).length} skills · memory ${e.memory ? 'read' : 'none'}`];
      case 'context.compacted': return ['Context compacted', `${e.messagesBefore} → ${e.messagesAfter} messages, ${e.tokensBefore} → ${e.tokensAfter} tokens`];
      case 'workspace.cloned': return ['Workspace cloned', `${e.url}${e.ref ? ` @ ${e.ref}` : ''} → ${e.commit.slice(0, 12)} · ${e.files} files in ${e.ms} ms${e.credential ? ' · with the tenant\'s credential' : ''}`];
      case 'setup.started': return ['Setup started', `${e.environment}: ${e.commands} commands · cache ${e.cache} · egress ${(e.egressAllow || []).join(', ') || 'none'}`];
      case 'setup.finished': return [`Setup ${e.ok ? 'finished' : 'failed'}`, `${e.ms} ms${e.cached ? ` · ${e.cached}` : ''}${e.reason ? ` · ${e.reason}` : ''}`, null, e.ok ? 'allow' : 'deny'];
      case 'mcp.started': return [`MCP server started: ${e.server}`, `${(e.tools || []).length} tools: ${(e.tools || []).map((t) => t.tool).join(', ') || 'none'}${(e.refused || []).length ? ` · not offered: ${e.refused.map((r) => `${r.tool} (${r.reason})`).join('; ')}` : ''}`];
      case 'mcp.failed': return [`MCP server failed: ${e.server}`, e.reason, e.stderr || null, 'deny'];
      case 'mcp.stopped': return [`MCP server ended: ${e.server}`, `${e.reason} · ${e.calls} calls, ${e.errors} errors, ${e.bytesIn} bytes read`, e.stderr || null];
      case 'egress.narrowed': return ['Egress narrowed', `now ${(e.allow || []).join(', ') || 'none'} · ${e.connectionsClosed} connections closed`];
      case 'budget.exceeded': return ['Budget exceeded', `${e.budget}: ${e.used} of ${e.limit}`, null, 'deny'];
      case 'memory.proposed': return [`Memory ${e.applied ? 'kept' : 'refused'}`, e.reason, (e.lines || []).join('\n') || null];
      case 'artifact': return [`Artifact: ${e.name}`, `${e.bytes} bytes`];
      case 'git.bundle': return ['Git bundle', `${e.commits} commits on ${e.branch}${e.needsReviewTotal ? ` · ${e.needsReviewTotal} changes to review` : ''}${e.note ? ` · ${e.note}` : ''}`, null, e.needsReviewTotal ? 'ask' : undefined];
      case 'workspace.changes': {
        const files = e.files || [];
        const count = (c) => files.filter((f) => f.change === c).length;
        const flags = (e.needsReview || []).length;
        const ignored = e.ignored ? ` · ${e.ignored.count} ignored by .gitignore (in the tar only)` : '';
        const outside = (e.notInPatch || []).length ? ` · ${e.notInPatch.length} too large for the patch` : '';
        return ['Workspace changes', `${count('added')} added · ${count('modified')} modified · ${count('deleted')} deleted${ignored}${outside}${flags ? ` · ${flags} need review` : ''}`, files.slice(0, 50).map((f) => `${f.change} ${f.path}`).join('\n') || null, flags ? 'ask' : undefined];
      }
      case 'sandbox.removed': return ['Sandbox removed', null];
      case 'effect.decision': return [`Effect ${e.decision === 'allow' ? 'accepted' : 'refused'}: ${e.effect === 'file' ? `${e.path} (${e.change})` : `connection to ${e.host}:${e.port}`}`, `${e.by}: ${e.reason}`, e.diff || null, e.decision];
      case 'effect.unchecked': return ['Effect check failed', e.reason, null, 'ask'];
      case 'effect.stats': return ['Effect checks', `${e.checks} checks (${e.mode}) · p50 ${e.p50Ms} ms · max ${e.maxMs} ms · ${e.restores} restores`];
      case 'secret.masked': return ['Secrets masked', `${e.where}: ${(e.found || []).map((f) => `${f.rule} ×${f.count}`).join(', ')}${e.coarse ? ` · coarse: ${e.coarse}` : ''}`, null, 'ask'];
      case 'log.truncated': return ['Log truncated', e.reason, null, 'ask'];
      case 'subrun.started': return ['Sub-run started', `${e.childRunId}: ${clip(e.task, 200)}`];
      case 'subrun.finished': return [`Sub-run ${e.outcome}`, `${e.childRunId}: ${e.reason}`, null, e.outcome === 'succeeded' ? 'allow' : 'deny'];
      case 'run.suspended': return ['Suspended', `waiting for ${(e.children || []).length} sub-runs`];
      case 'run.resumed': return ['Resumed', `on ${e.workerId} after ${Math.round(e.waitedMs / 1000)} s`];
      default: return [e.type, null, null];
    }
  }

  /** Fetches one of a run's files with the bearer header and hands it to the browser as a download. */
  async function download(path, filename) {
    const res = await fetch(path, { headers: headers() });
    if (!res.ok) {
      const data = await res.json().catch(() => ({}));
      throw new Error(data.error ? `${data.error.code}: ${data.error.message}` : `HTTP ${res.status}`);
    }
    const url = URL.createObjectURL(await res.blob());
    const a = document.createElement('a');
    a.href = url; // a blob: URL of this page's own making (el() keeps hrefs to the console's routes)
    a.download = filename;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  }
  // Every file a run has: the artifacts it recorded, its log while it goes, its report once it ended.
  const FILES = [
    ['patch', 'workspace.patch', 'artifacts/patch', 'Patch'], ['tar', 'workspace.tar', 'artifacts/workspace.tar', 'Workspace (tar)'],
    ['bundle', 'agent.bundle', 'artifacts/agent.bundle', 'Git bundle'], ['log', 'events.jsonl', 'logs', 'Log (JSONL)'], ['report', 'report.md', 'report', 'Report'],
  ];

  function runView(id) {
    let alive = true;
    const head = el('div');
    const files = el('div', { class: 'toolbar', id: 'downloads' });
    const review = el('div');
    const approvals = el('div', { id: 'approvals' });
    const budgets = el('div', { class: 'budgets' });
    const timeline = el('ol', { class: 'timeline', id: 'timeline' });
    const pane = el('div');
    const err = el('p', { class: 'error', role: 'alert' });
    const tabs = {};
    let run = null;
    const seen = new Set();

    const select = (name) => {
      for (const [k, b] of Object.entries(tabs)) b.setAttribute('aria-selected', String(k === name));
      if (name === 'timeline') pane.replaceChildren(timeline);
      else if (name === 'report') void loadText(`${runPath(id)}/report`, renderReport, 'The report is written when the run ends.');
      else if (name === 'patch') void loadText(`${runPath(id)}/artifacts/patch`, renderPatch, 'The patch is written when the run ends.');
    };
    for (const [name, label] of [['timeline', 'Timeline'], ['report', 'Report'], ['patch', 'Patch']]) {
      tabs[name] = el('button', { type: 'button', role: 'tab', id: `tab-${name}`, text: label, on: { click: () => select(name) } });
    }
    async function loadText(path, render, notYet) {
      pane.replaceChildren(el('p', { class: 'muted', text: 'Loading…' }));
      try {
        const res = await fetch(path, { headers: headers() });
        if (res.status === 404 || res.status === 409) return pane.replaceChildren(el('p', { class: 'muted', text: notYet }));
        if (!res.ok) throw new Error(`HTTP ${res.status}`);
        pane.replaceChildren(render(await res.text()));
      } catch (x) { pane.replaceChildren(el('p', { class: 'error', text: x.message })); }
    }

    const renderHead = () => {
      if (!run) return;
      const buttons = el('div', { class: 'toolbar' },
        !run.finishedAt && el('button', { type: 'button', class: 'danger', id: 'cancel', text: 'Cancel', on: { click: async () => {
          try { await api('POST', `${runPath(id)}/cancel`); await refresh(); } catch (x) { err.textContent = x.message; }
        } } }),
        run.finishedAt && el('button', { type: 'button', id: 'replay', text: 'Replay', on: { click: async () => {
          try { const r = await api('POST', `${runPath(id)}/replay`); location.hash = `#/runs/${r.id}`; } catch (x) { err.textContent = x.message; }
        } } }));
      head.replaceChildren(...[
        el('h1', {}, `Run ${run.id} `, el('span', { class: `status ${run.status}`, id: 'run-status', text: run.status })),
        el('p', { class: 'task', text: clip(run.task, 600) }),
        run.reason ? el('p', { id: 'run-reason' }, el('strong', { text: 'Reason: ' }), run.reason) : null,
        run.traceId ? el('p', { id: 'run-trace', class: 'muted' }, 'Trace: ',
          run.traceUrl ? el('a', { 'external-href': run.traceUrl, text: run.traceId }) : el('code', { text: run.traceId })) : null,
        buttons].filter(Boolean));
      const b = run.budgets || {};
      budgets.replaceChildren(...Object.entries(b).map(([k, u]) => el('div', {},
        el('div', { class: 'muted', text: `${k}: ${Math.round(u.used * 1000) / 1000} / ${u.limit}` }),
        el('div', { class: `bar${u.percent >= 90 ? ' hot' : ''}`, role: 'meter', 'aria-label': k, 'aria-valuenow': u.percent }, el('span', { 'style-width': `${Math.min(100, u.percent)}%` })))));
      const recorded = new Set((run.artifacts || []).map((a) => a.name));
      files.replaceChildren(...FILES
        .filter(([, name]) => recorded.has(name) || name === 'events.jsonl' || (name === 'report.md' && run.finishedAt))
        .map(([key, name, path, label]) => el('button', { type: 'button', 'data-download': key, text: `⬇ ${label}`, on: { click: async () => {
          try { await download(`${runPath(id)}/${path}`, `${id}-${name}`); } catch (x) { err.textContent = x.message; }
        } } })));
      const flags = run.workspace?.needsReview || [];
      review.replaceChildren(...(flags.length ? [el('div', { class: 'review', id: 'needs-review' }, el('strong', { text: `Needs review (${run.workspace.needsReviewTotal})` }),
        el('ul', {}, flags.map((f) => el('li', { text: `${f.path} — ${f.rule}${f.detail ? `: ${f.detail}` : ''}` }))))] : []));
      approvals.replaceChildren(...(run.pendingApprovals || []).map((p) => {
        // Who answers is the signed-in token (the server records it); the note is free text beside it.
        const by = el('input', { type: 'text', name: 'note', placeholder: 'note (optional)', 'aria-label': 'note', 'data-call': p.callId });
        const answer = (decision) => async () => {
          const note = by.value.trim();
          try { await api('POST', `${runPath(id)}/approvals/${encodeURIComponent(p.callId)}`, { decision, ...(note ? { note } : {}) }); err.textContent = ''; await refresh(); } catch (x) { err.textContent = x.message; }
        };
        return el('div', { class: 'approval', 'data-call': p.callId },
          el('strong', { text: `Approve ${p.tool}?` }), p.risk ? el('span', { class: 'muted', text: ` risk: ${p.risk}` }) : null,
          el('p', { text: `Why it asks: ${p.reason}` }), el('pre', { text: json(p.args) }),
          el('div', { class: 'toolbar' }, by,
            el('button', { type: 'button', class: 'primary', 'data-action': 'approve', text: 'Approve', on: { click: answer('approve') } }),
            el('button', { type: 'button', class: 'danger', 'data-action': 'deny', text: 'Deny', on: { click: answer('deny') } })));
      }));
    };
    async function refresh() {
      try { run = await api('GET', runPath(id)); renderHead(); } catch (x) { err.textContent = x.message; }
    }
    const addEvent = (e) => {
      if (seen.has(e.seq)) return;
      seen.add(e.seq);
      let shown;
      try {
        shown = describe(e);
      } catch {
        shown = [String(e.type), null, null]; // an event without the fields its kind should have
      }
      const [title, text, block, tone] = shown;
      timeline.append(el('li', { class: tone || '', 'data-type': e.type, 'data-seq': e.seq },
        el('span', { class: 'kind', text: title }), el('span', { class: 'muted', text: new Date(e.ts).toLocaleTimeString() }),
        text ? el('div', { text }) : null, block ? el('pre', { text: clip(block, 20000) }) : null));
      if (['approval.pending', 'run.finished', 'tool.result', 'approval.answered'].includes(e.type)) void refresh();
    };
    const ctrl = new AbortController();
    async function follow() {
      let after = '';
      while (alive) {
        try {
          const res = await fetch(`${runPath(id)}/events${after ? `?after=${encodeURIComponent(after)}` : ''}`, { headers: headers({ accept: 'text/event-stream' }), signal: ctrl.signal });
          if (!res.ok || !res.body) throw new Error(`events: HTTP ${res.status}`);
          const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
          let buf = '';
          let finished = false;
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buf += value;
            let cut;
            while ((cut = buf.indexOf('\n\n')) >= 0) {
              const msg = buf.slice(0, cut);
              buf = buf.slice(cut + 2);
              let data = '';
              for (const line of msg.split('\n')) {
                if (line.startsWith('id:')) after = line.slice(3).trim();
                else if (line.startsWith('data:')) data += line.slice(5).trimStart();
              }
              if (!data) continue;
              try {
                const ev = JSON.parse(data);
                if (ev && typeof ev.type === 'string' && typeof ev.seq === 'number') { addEvent(ev); if (ev.type === 'run.finished') finished = true; }
              } catch { /* a delta or a malformed message: skipped */ }
            }
          }
          if (finished) return refresh();
        } catch (x) {
          if (!alive) return;
          err.textContent = `live updates interrupted (${x.message}); retrying`;
        }
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
    show(head, review, approvals, el('h2', { text: 'Budgets' }), budgets, el('h2', { text: 'Files' }), files, el('div', { class: 'tabs', role: 'tablist' }, Object.values(tabs)), err, pane);
    select('timeline');
    void refresh().then(follow);
    const poll = setInterval(() => { if (run && !run.finishedAt) void refresh(); }, 3000);
    return () => { alive = false; ctrl.abort(); clearInterval(poll); };
  }

  // ---- report.md and the patch, rendered as text ------------------------------------------------------
  const unescape = (s) => s.replace(/\\([\\`*_{}[\]()#+\-.!|<>~])/g, '$1');
  function renderReport(md) {
    const out = el('div', { class: 'report', id: 'report' });
    const lines = md.split('\n');
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      if (line.startsWith('```')) {
        const body = [];
        for (i++; i < lines.length && !lines[i].startsWith('```'); i++) body.push(lines[i]);
        out.append(el('pre', { text: body.join('\n') }));
      } else if (/^#{1,6} /.test(line)) {
        const level = Math.min(4, line.indexOf(' '));
        out.append(el(`h${level}`, { text: unescape(line.replace(/^#+ /, '')) }));
      } else if (line.startsWith('|')) {
        const table = el('table');
        for (; i < lines.length && lines[i].startsWith('|'); i++) {
          if (/^\|[\s:|-]+\|$/.test(lines[i])) continue;
          table.append(el('tr', {}, lines[i].slice(1, -1).split(/(?<!\\)\|/).map((c) => el('td', { text: unescape(c.trim()) }))));
        }
        i--;
        out.append(table);
      } else if (/^\s*[-*] /.test(line)) {
        const ul = el('ul');
        for (; i < lines.length && /^\s*[-*] /.test(lines[i]); i++) ul.append(el('li', { text: unescape(lines[i].replace(/^\s*[-*] /, '')) }));
        i--;
        out.append(ul);
      } else if (line.startsWith('>')) {
        const q = [];
        for (; i < lines.length && lines[i].startsWith('>'); i++) q.push(lines[i].replace(/^> ?/, ''));
        i--;
        out.append(el('blockquote', { text: unescape(q.join('\n')) }));
      } else if (line.trim()) {
        out.append(el('p', { text: unescape(line) }));
      }
    }
    return out;
  }
  // One element per line, built off the page and added once; a git binary patch's body (base85) is
  // one line saying how long it is. window.__corralPatchMs is how long the last rendering took.
  function renderPatch(text) {
    const t0 = performance.now();
    if (!text.trim()) return el('p', { class: 'muted', text: 'The run changed no files.' });
    const out = el('div', { class: 'diff', id: 'patch' });
    const frag = document.createDocumentFragment();
    const lines = text.split('\n');
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      if (line === 'GIT binary patch') {
        let j = i + 1;
        while (j < lines.length && !lines[j].startsWith('diff --git ')) j++;
        frag.append(el('div', { class: 'hunk', text: `GIT binary patch (${j - i - 1} lines of base85: apply it with git apply)` }));
        i = j - 1;
        continue;
      }
      const cls = line.startsWith('diff ') || line.startsWith('--- ') || line.startsWith('+++ ') ? 'file' : line.startsWith('@@') ? 'hunk' : line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : '';
      const d = document.createElement('div');
      if (cls) d.className = cls;
      d.textContent = line || ' ';
      frag.append(d);
    }
    out.append(frag);
    window.__corralPatchMs = performance.now() - t0;
    return out;
  }

  // ---- router -------------------------------------------------------------------------------------------
  function route() {
    stopView();
    stopView = () => {};
    const hash = location.hash || '#/runs';
    if (token() === null && hash !== '#/signin') { location.hash = '#/signin'; return; }
    if (hash === '#/signin') return signIn();
    nav.hidden = false;
    const m = /^#\/runs\/([A-Za-z0-9_-]{1,64})$/.exec(hash);
    if (m) stopView = runView(m[1]);
    else if (hash === '#/new') stopView = newRunView();
    else stopView = runsView();
  }
  document.getElementById('signout').addEventListener('click', () => { sessionStorage.removeItem(TOKEN_KEY); location.hash = '#/signin'; });
  window.addEventListener('hashchange', route);
  route();
})();
