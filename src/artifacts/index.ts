/** The artifact store chosen by CORRAL_ARTIFACTS (see artifacts-url.ts). */
import type { Config } from '../config';
import type { ArtifactStore } from './artifact-store';
import { parseArtifactsUrl } from './artifacts-url';
import { LocalArtifactStore } from './local-artifact-store';
import { S3ArtifactStore } from './s3-artifact-store';

export function artifactStoreFor(config: Config): ArtifactStore {
  const t = parseArtifactsUrl(config.CORRAL_ARTIFACTS);
  return t.kind === 'local' ? new LocalArtifactStore(config.CORRAL_DATA_DIR) : new S3ArtifactStore(t, { ...(config.AWS_REGION ? { defaultRegion: config.AWS_REGION } : {}) });
}

export type { ArtifactStore, RunFileName } from './artifact-store';
export { LocalArtifactStore } from './local-artifact-store';
