/** The tools an agent run offers, and their JSON-Schema descriptions for the model. */
import { z } from 'zod';
import type { ToolSpec } from '../domain/model';
import { applyPatchTool } from './apply-patch';
import { bashTool } from './bash';
import { delegateTool } from './delegate';
import { fetchUrlTool } from './fetch-url';
import { editFileTool, listFilesTool, readFileTool, writeFileTool } from './files';
import type { Tool } from './tool';

export const TOOLS: readonly Tool[] = [bashTool, readFileTool, writeFileTool, editFileTool, applyPatchTool, listFilesTool, fetchUrlTool, delegateTool] as Tool[];

export function findTool(name: string): Tool | undefined {
  return TOOLS.find((t) => t.name === name);
}

export function toolSpecs(tools: readonly Tool[] = TOOLS): ToolSpec[] {
  return tools.map((t) => {
    const { $schema: _ignored, ...parameters } = z.toJSONSchema(t.schema, { io: 'input' }) as Record<string, unknown>;
    return { name: t.name, description: t.description, parameters };
  });
}
