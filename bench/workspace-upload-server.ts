/** The API alone (no Redis: only PUT /v1/workspaces is used), listening on loopback; prints {"port"} (bench/workspace-upload.ts). */
import { WorkspaceUploads } from '../src/workspaces/workspace-uploads';
import { offlineApp } from '../test/support/offline-api';

async function main(): Promise<void> {
  const app = offlineApp({ tokens: null, uploads: new WorkspaceUploads(process.argv[2]!, 3600), env: { CORRAL_MAX_WORKSPACE_MB: '512' } });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address() as { port: number };
  process.stdout.write(`${JSON.stringify({ port: addr.port })}\n`);
}
main().catch((err: unknown) => { console.error(err); process.exitCode = 1; });
