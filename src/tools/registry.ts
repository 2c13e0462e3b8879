/** The tools an agent run offers, and their JSON-Schema descriptions for the model. */
import { z } from 'zod';
import type { ToolSpec } from '../domain/model';
import { applyPatchTool } from './apply-patch';
import { bashTool } from './bash';
import { delegateTool } from './delegate';
import { fetchUrlTool } from './fetch-url';
import { editFileTool, listFilesTool, readFileTool, writeFileTool } from './files';
import type { Config } from '../config';
import type { Tool } from './tool';
import { webSearchEngine, webSearchTool } from './web-search';

export const TOOLS: readonly Tool[] = [bashTool, readFileTool, writeFileTool, editFileTool, applyPatchTool, listFilesTool, fetchUrlTool, delegateTool] as Tool[];

const configured = new WeakMap<object, readonly Tool[]>();

/**
 * The tools of this deployment: TOOLS, plus web_search when the operator configured a search service
 * (CORRAL_WEB_SEARCH). Admission (the API) and the worker both use it, so a task's allowedTools is
 * checked against what the worker will offer.
 */
export function toolsFor(config: Config): readonly Tool[] {
  let tools = configured.get(config);
  if (!tools) {
    const engine = webSearchEngine(config);
    tools = engine ? [...TOOLS.slice(0, -1), webSearchTool(engine) as Tool, TOOLS.at(-1)!] : TOOLS;
    configured.set(config, tools);
  }
  return tools;
}

export function findTool(name: string): Tool | undefined {
  return TOOLS.find((t) => t.name === name);
}

export function toolSpecs(tools: readonly Tool[] = TOOLS): ToolSpec[] {
  return tools.map((t) => {
    if (t.parameters) return { name: t.name, description: t.description, parameters: t.parameters };
    const { $schema: _ignored, ...parameters } = z.toJSONSchema(t.schema, { io: 'input' }) as Record<string, unknown>;
    return { name: t.name, description: t.description, parameters };
  });
}
