/**
 * /docs: the OpenAPI document rendered as one self-contained HTML page (no scripts, no CDN — these
 * hosts have no internet): each endpoint with its parameters, body and responses, schemas as JSON.
 */

const esc = (s: unknown): string => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

type Obj = Record<string, unknown>;

function schemaBlock(schema: unknown): string {
  if (!schema) return '';
  const ref = (schema as Obj).$ref;
  if (typeof ref === 'string') {
    const name = ref.split('/').at(-1)!;
    return `<a href="#schema-${esc(name)}">${esc(name)}</a>`;
  }
  return `<details><summary>schema</summary><pre>${esc(JSON.stringify(schema, null, 2))}</pre></details>`;
}

export function renderDocsPage(doc: Obj): string {
  const info = doc.info as Obj;
  const paths = doc.paths as Record<string, Record<string, Obj>>;
  const ops: string[] = [];
  const toc: string[] = [];
  for (const [path, methods] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const id = String(op.operationId);
      toc.push(`<li><a href="#${esc(id)}"><code>${esc(method.toUpperCase())} ${esc(path)}</code></a> — ${esc(op.summary)}</li>`);
      const params = (op.parameters as Obj[]).map((p) => `<tr><td><code>${esc(p.name)}</code></td><td>${esc(p.in)}</td><td>${p.required ? 'yes' : ''}</td><td>${esc(p.description ?? '')} <code>${esc(JSON.stringify(p.schema))}</code></td></tr>`);
      const body = op.requestBody
        ? Object.entries((op.requestBody as Obj).content as Record<string, Obj>).map(([ct, c]) => `<h4>Body (${esc(ct)})</h4>${schemaBlock(c.schema)}`).join('')
          + ((op.requestBody as Obj).description ? `<p>${esc((op.requestBody as Obj).description)}</p>` : '')
        : '';
      const responses = Object.entries(op.responses as Record<string, Obj>).map(([status, r]) => {
        const content = r.content as Record<string, Obj> | undefined;
        const types = content ? Object.entries(content).map(([ct, c]) => `<code>${esc(ct)}</code> ${schemaBlock(c.schema)}`).join(' ') : '';
        return `<tr><td>${esc(status)}</td><td>${esc(r.description)}</td><td>${types}</td></tr>`;
      });
      ops.push(`<section id="${esc(id)}"><h3><code>${esc(method.toUpperCase())} ${esc(path)}</code>${Array.isArray(op.security) && op.security.length === 0 ? ' <small>(no token needed)</small>' : ''}</h3>
<p>${esc(op.summary)}</p>${op.description ? `<p>${esc(op.description)}</p>` : ''}
${params.length ? `<h4>Parameters</h4><table><tr><th>name</th><th>in</th><th>required</th><th></th></tr>${params.join('')}</table>` : ''}
${body}<h4>Responses</h4><table><tr><th>status</th><th></th><th>content</th></tr>${responses.join('')}</table></section>`);
    }
  }
  const schemas = Object.entries(((doc.components as Obj).schemas ?? {}) as Obj).map(([name, s]) => `<section id="schema-${esc(name)}"><h3>${esc(name)}</h3><pre>${esc(JSON.stringify(s, null, 2))}</pre></section>`);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(info.title)} API</title>
<style>body{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
code,pre{font-family:ui-monospace,monospace}pre{background:#f5f5f5;padding:.6rem;overflow:auto;font-size:13px}
table{border-collapse:collapse;margin:.4rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}
section{border-top:1px solid #eee;margin-top:1.2rem}h3 small{color:#777;font-weight:normal}</style></head>
<body><h1>${esc(info.title)} API <small>${esc(info.version)}</small></h1>
<p>${esc(info.description)}</p><p>Machine-readable: <a href="/openapi.json">/openapi.json</a> (OpenAPI ${esc(doc.openapi)}).</p>
<h2>Endpoints</h2><ul>${toc.join('')}</ul>${ops.join('\n')}
<h2>Schemas</h2>${schemas.join('\n')}
</body></html>`;
}
