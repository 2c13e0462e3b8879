/**
 * Reads the template library (`CORRAL_TEMPLATES_DIR`, default ./templates: every NAME.md in it) at
 * start-up. A template that does not parse stops start-up with its file and line; each template's
 * examples are then rendered and admitted like any submitted body (checkTemplateExamples, run when
 * the API becomes ready), so a template whose examples would be refused fails at boot too.
 * A missing directory is an empty library.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parseTemplate, renderTemplate, TemplateError, type RunTemplate } from '../domain/run-template';

const MAX_TEMPLATES = 500;

export function loadTemplates(dir: string): RunTemplate[] {
  if (!existsSync(dir)) return [];
  if (!statSync(dir).isDirectory()) throw new TemplateError(`CORRAL_TEMPLATES_DIR ${dir} is not a directory`);
  const files = readdirSync(dir).filter((f) => f.endsWith('.md') && f !== 'README.md').sort();
  if (files.length > MAX_TEMPLATES) throw new TemplateError(`${dir}: more than ${MAX_TEMPLATES} templates`);
  return files.map((f) => parseTemplate(basename(f, '.md'), readFileSync(join(dir, f), 'utf8'), join(dir, f)));
}

/** Renders every example of every template and admits it with `admit`; TemplateError naming the template and example. */
export async function checkTemplateExamples(templates: readonly RunTemplate[], admit: (body: Record<string, unknown>) => Promise<unknown>): Promise<void> {
  for (const t of templates) {
    for (const [i, ex] of t.examples.entries()) {
      try {
        await admit(renderTemplate(t, ex));
      } catch (err) {
        throw new TemplateError(`${t.source}: examples.${i} (${JSON.stringify(ex)}) would be refused: ${(err as Error).message}`);
      }
    }
  }
}
